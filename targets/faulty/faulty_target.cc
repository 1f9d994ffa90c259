// FaultyTarget: forwards to an inner target and perturbs selected results.
#include "targets/faulty/faulty_target.h"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <optional>

#include "harness/scenario/abi.h"

namespace kconform {
namespace {

struct KindName {
  FaultSpec::Kind kind;
  std::string_view name;
};
constexpr KindName kKinds[] = {
    {FaultSpec::Kind::kWrongErrno, "wrong-errno"},
    {FaultSpec::Kind::kWrongContent, "wrong-content"},
    {FaultSpec::Kind::kSucceed, "succeed"},
    {FaultSpec::Kind::kFail, "fail"},
    {FaultSpec::Kind::kWrongCount, "wrong-count"},
    {FaultSpec::Kind::kWrongReg, "wrong-reg"},
    {FaultSpec::Kind::kWrongState, "wrong-state"},
};

std::string kind_list() {
  std::string out;
  for (const KindName& k : kKinds) {
    if (!out.empty()) out += ", ";
    out += k.name;
  }
  return out;
}

// The ABIs whose op names a spec may use.
constexpr std::string_view kAbiNames[] = {"gmem", "ffa"};

bool known_op(std::string_view op) {
  for (std::string_view abi : kAbiNames)
    if (const AbiSpec* spec = abi_spec_by_name(abi); spec && op_code_by_name(*spec, op))
      return true;
  return false;
}

std::string op_list() {
  std::string out;
  for (std::string_view abi : kAbiNames) {
    const AbiSpec* spec = abi_spec_by_name(abi);
    if (spec == nullptr) continue;
    for (const OpSpec& op : spec->ops) {
      if (!out.empty()) out += ", ";
      out += op.name;
    }
  }
  return out;
}

bool eligible(FaultSpec::Kind kind, const Outcome& o) {
  switch (kind) {
    case FaultSpec::Kind::kWrongErrno:
    case FaultSpec::Kind::kSucceed:
      return o.kind == Outcome::Kind::kErrno;
    case FaultSpec::Kind::kWrongContent:
    case FaultSpec::Kind::kFail:
    case FaultSpec::Kind::kWrongCount:
    case FaultSpec::Kind::kWrongReg:
    case FaultSpec::Kind::kWrongState:
      return o.kind == Outcome::Kind::kOk;
  }
  return false;
}

Outcome perturb(FaultSpec::Kind kind, Outcome o, int64_t page) {
  switch (kind) {
    case FaultSpec::Kind::kWrongErrno:
      return Outcome::err(o.value == ENOTRECOVERABLE ? EOWNERDEAD : ENOTRECOVERABLE);
    case FaultSpec::Kind::kWrongContent:
      o.aux = ~o.aux;
      return o;
    case FaultSpec::Kind::kSucceed:
      return Outcome::ok(0);
    case FaultSpec::Kind::kFail:
      return Outcome::err(EIO);
    case FaultSpec::Kind::kWrongCount:
      o.value = o.value >= page ? o.value - page : o.value + page;
      return o;
    case FaultSpec::Kind::kWrongReg:
      o.regs[2] ^= 1;
      return o;
    case FaultSpec::Kind::kWrongState:
      o.state = ~o.state;
      return o;
  }
  return o;
}

class FaultyTarget : public Target {
 public:
  FaultyTarget(std::unique_ptr<Target> inner, FaultSpec spec)
      : inner_(std::move(inner)), spec_(std::move(spec)) {
    identity_ = inner_->identity();
    identity_.target += "+fault(" + spec_.text + ")";
    // One page: the inner target's probed page size, else this process's.
    long ps = sysconf(_SC_PAGESIZE);
    page_ = ps > 0 ? ps : 4096;
    for (const auto& [name, value] : identity_.caps)
      if (name == "page_size" && value != 0) page_ = static_cast<int64_t>(value);
  }

  const TargetIdentity& identity() const override { return identity_; }

  void begin(const Scenario& s) override {
    seen_ = 0;
    code_.reset();
    const AbiSpec& abi = abi_spec(s.abi);
    if (abi.abi == s.abi) code_ = op_code_by_name(abi, spec_.op);
    inner_->begin(s);
  }

  Outcome exec(const Scenario& s, size_t i) override {
    Outcome o = inner_->exec(s, i);
    if (!code_ || i >= s.ops.size() || s.ops[i].code != *code_ || !eligible(spec_.kind, o))
      return o;
    ++seen_;
    if (spec_.nth != 0 && seen_ != spec_.nth) return o;
    return perturb(spec_.kind, o, page_);
  }

  void end() override { inner_->end(); }

 private:
  std::unique_ptr<Target> inner_;
  FaultSpec spec_;
  TargetIdentity identity_;
  int64_t page_;
  std::optional<uint8_t> code_;  // spec_.op in this scenario's ABI
  uint64_t seen_ = 0;            // eligible results of code_ so far
};

}  // namespace

std::optional<FaultSpec> parse_fault_spec(std::string_view spec, std::string* error) {
  auto fail = [&](std::string msg) -> std::optional<FaultSpec> {
    if (error) *error = "fault spec '" + std::string(spec) + "': " + std::move(msg);
    return std::nullopt;
  };
  const size_t c1 = spec.find(':');
  if (c1 == std::string_view::npos)
    return fail("expected KIND:OP[:NTH], e.g. wrong-errno:write (known kinds: " + kind_list() +
                ")");
  const std::string_view kind = spec.substr(0, c1);
  std::string_view rest = spec.substr(c1 + 1);
  const size_t c2 = rest.find(':');
  const std::string_view op = rest.substr(0, c2);
  const std::optional<std::string_view> nth =
      c2 == std::string_view::npos ? std::nullopt : std::optional(rest.substr(c2 + 1));

  FaultSpec out;
  bool found = false;
  for (const KindName& k : kKinds) {
    if (k.name == kind) {
      out.kind = k.kind;
      found = true;
    }
  }
  if (!found)
    return fail("unknown KIND '" + std::string(kind) + "' (known kinds: " + kind_list() + ")");
  if (op.empty()) return fail("OP is empty (an op name, e.g. write)");
  if (!known_op(op))
    return fail("unknown OP '" + std::string(op) + "' (known ops: " + op_list() + ")");
  out.op = std::string(op);
  if (nth) {
    if (*nth == "all") {
      out.nth = 0;
    } else {
      uint64_t v = 0;
      auto [end, ec] = std::from_chars(nth->data(), nth->data() + nth->size(), v);
      if (nth->empty() || ec != std::errc() || end != nth->data() + nth->size() || v == 0)
        return fail("bad NTH '" + std::string(*nth) + "' (a count from 1, or 'all')");
      out.nth = v;
    }
  }
  out.text = std::string(kind) + ":" + out.op;
  if (out.nth != 1) out.text += ":" + (out.nth == 0 ? std::string("all") : std::to_string(out.nth));
  return out;
}

std::unique_ptr<Target> wrap_faulty(std::unique_ptr<Target> inner, FaultSpec spec) {
  return std::make_unique<FaultyTarget>(std::move(inner), std::move(spec));
}

}  // namespace kconform
