// What both guest agents (targets/qemu/agent/agent_main.cc, guest_memfd on
// x86; targets/qemu_arm64/agent/ffa_agent.cc, FF-A on arm64) do with the
// guest they run in: read /proc files and the command line, write to the
// kernel log, open the frame port and send frames (frame.h), list the
// packed scenarios.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kconform::qemu {

std::string read_file(const std::string& path);
double uptime();  // /proc/uptime, seconds
// The value of key=VALUE on the kernel command line, or dflt.
std::string cmdline_value(const std::string& cmdline, const std::string& key, const std::string& dflt);
// One line "kconform: text" in the kernel log (/dev/kmsg), so a console log
// shows what the agent was doing when the kernel broke.
void kmsg(const std::string& text);
// The port frames go to: kconform.port=PATH on the command line, else
// default_port, else /dev/console; raw mode (no \n -> \r\n). -1 if none opens.
int open_port(const std::string& cmdline, const std::string& default_port);
// The scenarios packed into the initramfs: ROOT/scenarios/*.kcsb, names sorted.
std::vector<std::string> scenario_files(const std::string& root);

// Writes frames to one file descriptor; every frame is one write of one line.
class Sender {
 public:
  explicit Sender(int fd) : fd_(fd) {}
  void send(const nlohmann::json& payload);

 private:
  int fd_;
  uint64_t seq_ = 0;
};

}  // namespace kconform::qemu
