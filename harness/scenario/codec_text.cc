// The text scenario encoding (see codec.h for the grammar).
#include <cctype>
#include <charconv>

#include "harness/scenario/abi.h"
#include "harness/scenario/codec.h"

namespace kconform {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_words(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    size_t j = i;
    while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

// Decimal or 0x hex, optional K/M/G suffix; rejects overflow.
bool parse_u64(std::string_view t, uint64_t* out) {
  uint64_t mult = 1;
  if (!t.empty()) {
    char last = t.back();
    if (last == 'K' || last == 'M' || last == 'G') {
      mult = last == 'K' ? 1ull << 10 : last == 'M' ? 1ull << 20 : 1ull << 30;
      t.remove_suffix(1);
    }
  }
  int base = 10;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
    base = 16;
    t.remove_prefix(2);
  }
  if (t.empty()) return false;
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v, base);
  if (ec != std::errc() || ptr != t.data() + t.size()) return false;
  if (v != 0 && mult > 1 && v > UINT64_MAX / mult) return false;
  *out = v * mult;
  return true;
}

bool lookup_name(std::span<const NamedValue> names, std::string_view t, uint64_t* out) {
  for (const NamedValue& nv : names)
    if (t == nv.name) {
      *out = nv.value;
      return true;
    }
  return parse_u64(t, out);
}

bool parse_hex_bytes(std::string_view t, std::vector<uint8_t>* out) {
  if (t.substr(0, 4) != "hex:") return false;
  t.remove_prefix(4);
  if (t.size() % 2) return false;
  out->clear();
  for (size_t i = 0; i < t.size(); i += 2) {
    uint8_t b = 0;
    auto [ptr, ec] = std::from_chars(t.data() + i, t.data() + i + 2, b, 16);
    if (ec != std::errc() || ptr != t.data() + i + 2) return false;
    out->push_back(b);
  }
  return true;
}

class Parser {
 public:
  Parser(std::string_view path, std::vector<Scenario>* out, std::string* error)
      : path_(path), out_(out), error_(error) {}

  bool line(size_t lineno, std::string_view text) {
    lineno_ = lineno;
    size_t hash = text.find('#');
    if (hash != std::string_view::npos) text = text.substr(0, hash);
    text = trim(text);
    if (text.empty()) return true;
    auto words = split_words(text);
    if (words[0] == kTextMagic) return start(words);
    if (!cur_) return fail("expected 'kconform-scenario 1' before anything else");
    if (words[0] == "abi") return set_abi(words);
    if (words[0] == "name") return set_name(text);
    if (words[0] == "requires") return set_requires(words);
    if (words[0] == "repeat") return set_repeat(words);
    return add_op(words);
  }

  bool finish() { return close_current(); }

 private:
  bool fail(const std::string& msg) {
    *error_ = std::string(path_) + ":" + std::to_string(lineno_) + ": " + msg;
    return false;
  }

  bool start(const std::vector<std::string_view>& w) {
    if (!close_current()) return false;
    uint64_t v;
    if (w.size() != 2 || !parse_u64(w[1], &v))
      return fail("field 'version': expected 'kconform-scenario <version>'");
    if (v < kScenarioVersionPlain || v > kScenarioVersion)
      return fail("field 'version': " + std::string(w[1]) + " is not supported (this build reads 1 to " +
                  std::to_string(kScenarioVersion) + ")");
    out_->emplace_back();
    cur_ = &out_->back();
    cur_->version = static_cast<uint8_t>(v);
    have_repeat_ = false;
    start_line_ = lineno_;
    have_abi_ = have_name_ = false;
    return true;
  }

  bool close_current() {
    if (!cur_) return true;
    if (!have_abi_ || !have_name_) {
      lineno_ = start_line_;
      return fail("scenario starting here lacks an 'abi' or 'name' line");
    }
    std::string why;
    if (!validate(*cur_, &why)) {
      lineno_ = start_line_;
      return fail("scenario '" + cur_->name + "': " + why);
    }
    cur_ = nullptr;
    return true;
  }

  bool set_abi(const std::vector<std::string_view>& w) {
    if (have_abi_ || !cur_->ops.empty()) return fail("field 'abi': must come once, before the ops");
    if (w.size() != 2) return fail("field 'abi': expected 'abi <name>'");
    const AbiSpec* abi = abi_spec_by_name(w[1]);
    if (!abi) return fail("field 'abi': unknown ABI '" + std::string(w[1]) + "'");
    cur_->abi = abi->abi;
    have_abi_ = true;
    return true;
  }

  bool set_name(std::string_view text) {
    if (have_name_ || !cur_->ops.empty())
      return fail("field 'name': must come once, before the ops");
    std::string_view name = trim(text.substr(4));
    if (name.empty() || name.size() > kMaxNameBytes)
      return fail("field 'name': must be 1 to 255 characters");
    cur_->name = name;
    have_name_ = true;
    return true;
  }

  bool set_requires(const std::vector<std::string_view>& w) {
    if (!have_abi_) return fail("field 'requires': must follow the 'abi' line");
    if (!cur_->ops.empty()) return fail("field 'requires': must come before the ops");
    const AbiSpec& abi = abi_spec(cur_->abi);
    for (size_t i = 1; i < w.size(); ++i) {
      bool found = false;
      for (const NamedValue& cap : abi.capabilities)
        if (w[i] == cap.name) {
          cur_->requires_caps |= 1u << cap.value;
          found = true;
        }
      if (!found) return fail("field 'requires': unknown capability '" + std::string(w[i]) + "'");
    }
    return true;
  }

  bool set_repeat(const std::vector<std::string_view>& w) {
    if (cur_->version < 2) return fail("field 'repeat': needs 'kconform-scenario 2'");
    if (have_repeat_ || !cur_->ops.empty()) return fail("field 'repeat': must come once, before the ops");
    uint64_t n;
    if (w.size() != 2 || !parse_u64(w[1], &n)) return fail("field 'repeat': expected 'repeat <count>'");
    if (n < 1 || n > kMaxRepeat)
      return fail("field 'repeat': " + std::string(w[1]) + " is out of range 1.." + std::to_string(kMaxRepeat));
    cur_->repeat = static_cast<uint32_t>(n);
    have_repeat_ = true;
    return true;
  }

  bool add_op(std::vector<std::string_view> w) {
    if (!have_abi_ || !have_name_) return fail("op before the 'abi' and 'name' lines");
    const AbiSpec& abi = abi_spec(cur_->abi);
    size_t index = cur_->ops.size();
    uint64_t thread = 0;
    if (w[0].front() == '@') {
      std::string where = "op " + std::to_string(index) + " field 'thread': ";
      if (cur_->version < 2) return fail(where + "needs 'kconform-scenario 2'");
      if (!parse_u64(w[0].substr(1), &thread)) return fail(where + "cannot read '" + std::string(w[0]) + "'");
      if (thread < 1 || thread > kMaxThreads)
        return fail(where + std::string(w[0].substr(1)) + " is out of range 1.." + std::to_string(kMaxThreads));
      w.erase(w.begin());
      if (w.empty()) return fail("op " + std::to_string(index) + ": no op after '@" + std::to_string(thread) + "'");
    }
    auto code = op_code_by_name(abi, w[0]);
    if (!code) return fail("op " + std::to_string(index) + ": unknown op '" + std::string(w[0]) + "'");
    const OpSpec& spec = abi.ops[*code];
    Op op;
    op.code = *code;
    op.thread = static_cast<uint8_t>(thread);
    std::vector<bool> seen(spec.args.size(), false);
    for (size_t i = 1; i < w.size(); ++i) {
      size_t eq = w[i].find('=');
      std::string where = "op " + std::to_string(index) + " (" + spec.name + ") field '";
      if (eq == std::string_view::npos)
        return fail(where + std::string(w[i]) + "': expected name=value");
      std::string_view key = w[i].substr(0, eq), val = w[i].substr(eq + 1);
      size_t a = 0;
      while (a < spec.args.size() && key != spec.args[a].name) ++a;
      if (a == spec.args.size()) return fail(where + std::string(key) + "': no such field");
      where += std::string(key) + "': ";
      if (seen[a]) return fail(where + "given twice");
      seen[a] = true;
      const ArgSpec& arg = spec.args[a];
      bool ok = false;
      switch (arg.kind) {
        case ArgKind::kInt:
        case ArgKind::kSlot:
          ok = parse_u64(val, &op.args[a]);
          break;
        case ArgKind::kEnum:
          ok = lookup_name(arg.names, val, &op.args[a]);
          break;
        case ArgKind::kFlags: {
          uint64_t acc = 0;
          ok = true;
          size_t start = 0;
          while (ok && start <= val.size()) {
            size_t bar = val.find('|', start);
            if (bar == std::string_view::npos) bar = val.size();
            uint64_t bit;
            ok = lookup_name(arg.names, val.substr(start, bar - start), &bit);
            acc |= bit;
            start = bar + 1;
          }
          op.args[a] = acc;
          break;
        }
        case ArgKind::kBytes: {
          std::vector<uint8_t> bytes;
          ok = parse_hex_bytes(val, &bytes);
          op.args[a] = cur_->blobs.size();
          if (ok) cur_->blobs.push_back(std::move(bytes));
          break;
        }
      }
      if (!ok) return fail(where + "cannot read '" + std::string(val) + "'");
    }
    for (size_t a = 0; a < spec.args.size(); ++a) {
      if (seen[a]) continue;
      if (!spec.args[a].optional)
        return fail("op " + std::to_string(index) + " (" + spec.name + ") field '" +
                    spec.args[a].name + "': missing");
      op.args[a] = spec.args[a].dflt;
    }
    cur_->ops.push_back(op);
    // A concurrent group is complete only after its last op: it is checked
    // with the next op of thread 0 or when the scenario closes (the message
    // names the op and field either way).
    if (op.thread != 0) return true;
    std::string why;
    if (!validate(*cur_, &why)) return fail(why);
    return true;
  }

  std::string_view path_;
  std::vector<Scenario>* out_;
  std::string* error_;
  Scenario* cur_ = nullptr;
  size_t lineno_ = 0, start_line_ = 0;
  bool have_abi_ = false, have_name_ = false, have_repeat_ = false;
};

}  // namespace

bool parse_text(std::string_view text, std::string_view path, std::vector<Scenario>* out,
                std::string* error) {
  std::vector<Scenario> parsed;
  Parser p(path, &parsed, error);
  size_t lineno = 1, start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    if (!p.line(lineno, text.substr(start, nl - start))) return false;
    start = nl + 1;
    ++lineno;
  }
  if (!p.finish()) return false;
  if (parsed.empty()) {
    *error = std::string(path) + ": no scenario (expected 'kconform-scenario 1')";
    return false;
  }
  for (auto& s : parsed) out->push_back(std::move(s));
  return true;
}

std::string format_text(const Scenario& s) {
  const AbiSpec& abi = abi_spec(s.abi);
  std::string out = std::string(kTextMagic) + " " + std::to_string(s.version) + "\n";
  out += "abi " + std::string(abi.name) + "\n";
  out += "name " + s.name + "\n";
  if (s.requires_caps) {
    out += "requires";
    for (const NamedValue& cap : abi.capabilities)
      if (s.requires_caps & (1u << cap.value)) out += " " + std::string(cap.name);
    out += "\n";
  }
  if (s.version >= 2 && s.repeat != 1) out += "repeat " + std::to_string(s.repeat) + "\n";
  for (size_t i = 0; i < s.ops.size(); ++i) {
    if (s.ops[i].thread != 0) out += "@" + std::to_string(s.ops[i].thread) + " ";
    out += format_op(s, i) + "\n";
  }
  return out;
}

}  // namespace kconform
