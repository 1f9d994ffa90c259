// Guest-side I/O shared by the agents (guest_io.h).
#include "targets/qemu/wire/guest_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "targets/qemu/wire/frame.h"

namespace kconform::qemu {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

double uptime() {
  double up = 0;
  std::sscanf(read_file("/proc/uptime").c_str(), "%lf", &up);
  return up;
}

void Sender::send(const nlohmann::json& payload) {
  std::string line = encode_frame(seq_++, payload.dump());
  const char* p = line.data();
  size_t left = line.size();
  while (left) {
    ssize_t n = write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the port is gone: nothing left to tell
    p += n;
    left -= static_cast<size_t>(n);
  }
}

std::string cmdline_value(const std::string& cmdline, const std::string& key, const std::string& dflt) {
  size_t at = cmdline.find(key + "=");
  if (at == std::string::npos) return dflt;
  size_t start = at + key.size() + 1;
  return cmdline.substr(start, cmdline.find_first_of(" \n", start) - start);
}

void kmsg(const std::string& text) {
  int fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  std::string line = "<5>kconform: " + text + "\n";
  ssize_t unused = write(fd, line.data(), line.size());
  (void)unused;
  close(fd);
}

int open_port(const std::string& cmdline, const std::string& default_port) {
  std::string port = cmdline_value(cmdline, "kconform.port", default_port);
  int fd = open(port.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) fd = open("/dev/console", O_WRONLY | O_NOCTTY | O_CLOEXEC);
  struct termios t;
  if (fd >= 0 && tcgetattr(fd, &t) == 0) {
    cfmakeraw(&t);  // no \n -> \r\n, no flow control surprises
    tcsetattr(fd, TCSANOW, &t);
  }
  return fd;
}

std::vector<std::string> scenario_files(const std::string& root) {
  std::vector<std::string> out;
  std::string dir = root + "/scenarios";
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 5 && n.compare(n.size() - 5, 5, ".kcsb") == 0) out.push_back(n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace kconform::qemu
