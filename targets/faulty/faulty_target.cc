// FaultyTarget: forwards to an inner target and perturbs selected results.
#include "targets/faulty/faulty_target.h"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <optional>

#include "harness/scenario/ffa_abi.h"
#include "harness/scenario/ffa_spec.h"

namespace kconform {
namespace {

using Kind = FaultSpec::Kind;

struct KindName {
  Kind kind;
  std::string_view name;
};
constexpr KindName kKinds[] = {
    {Kind::kWrongErrno, "wrong-errno"}, {Kind::kWrongContent, "wrong-content"}, {Kind::kWrongPage, "wrong-page"},
    {Kind::kSucceed, "succeed"},
    {Kind::kFail, "fail"},              {Kind::kWrongCount, "wrong-count"},     {Kind::kWrongReg, "wrong-reg"},
    {Kind::kWrongState, "wrong-state"},
};

std::string_view kind_name(Kind kind) {
  for (const KindName& k : kKinds)
    if (k.kind == kind) return k.name;
  return "?";
}

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

// guest_memfd ops whose ok result carries content in aux, and those whose
// value is a count or an offset (targets/README.md, the harness conventions).
constexpr std::string_view kGmemContentOps[] = {"load", "fstat"};
constexpr std::string_view kGmemCountOps[] = {"write", "pwrite", "pwritev", "read", "pread", "lseek"};
// ... and those after which the target re-reads pages (gmem_abi.h changes_data).
constexpr std::string_view kGmemRereadOps[] = {"create_gmem", "write", "pwrite", "pwritev", "store", "fallocate"};

template <size_t N>
bool among(std::string_view op, const std::string_view (&names)[N]) {
  for (std::string_view n : names)
    if (n == op) return true;
  return false;
}

// An FF-A op of the ABI table that calls no code under test ("harness: ..." in its doc).
bool harness_op(const OpSpec& op) { return std::string_view(op.doc).rfind("harness:", 0) == 0; }

// Empty if kind applies to op of abi, else why not.
std::string why_not(Kind kind, const AbiSpec& abi, const OpSpec& op) {
  const std::string_view name = op.name;
  if (abi.abi == Abi::kGmem) {
    switch (kind) {
      case Kind::kWrongErrno:
      case Kind::kSucceed:
      case Kind::kFail:
        return "";
      case Kind::kWrongContent:
        return among(name, kGmemContentOps) ? "" : "applies to the ops whose result carries content (load, fstat)";
      case Kind::kWrongPage:
        return among(name, kGmemRereadOps) ? ""
                                           : "applies to the ops after which pages are re-read (create_gmem, write, "
                                             "pwrite, pwritev, store, fallocate)";
      case Kind::kWrongCount:
        return among(name, kGmemCountOps) ? ""
                                          : "applies to the ops that return a count or an offset (write, pwrite, "
                                            "pwritev, read, pread, lseek)";
      case Kind::kWrongReg:
      case Kind::kWrongState:
        return "is for FF-A results (registers x0..x7, the state digest); a gmem op returns a value or an errno";
    }
  }
  if (abi.abi == Abi::kFfa) {
    switch (kind) {
      case Kind::kWrongContent:
      case Kind::kWrongPage:
      case Kind::kWrongCount:
        return "is for gmem results; an FF-A result is registers and a state digest (use wrong-reg for x2: "
               "status, handle, count; wrong-state for the state)";
      case Kind::kWrongState:
        return "";
      case Kind::kWrongErrno:
      case Kind::kSucceed:
      case Kind::kFail:
      case Kind::kWrongReg:
        return harness_op(op) ? "'" + std::string(name) +
                                    "' is a harness op (no FF-A call of the code under test): only wrong-state "
                                    "applies to it"
                              : "";
    }
  }
  return "does not apply to the " + std::string(abi.name) + " ABI";
}

// How an op's result reads: gmem (value or errno); FF-A (FFA_ERROR with the
// status in w2, else FFA_SUCCESS and its values from w2); FFA_VERSION (SPEC.md
// VERSION:FORMAT: the version, or NOT_SUPPORTED, in w0, never an FFA_ERROR frame).
enum class Form { kGmem, kFfa, kFfaVersion };

bool is_ffa_error(const Outcome& o, Form form) {
  if (o.kind != Outcome::Kind::kOk) return false;
  if (form == Form::kFfaVersion) return static_cast<int32_t>(o.regs[0] & 0xffffffffu) < 0;  // bit 31 MBZ
  return (o.regs[0] & 0xffffffffu) == ffa::kFnError;
}

bool eligible(Kind kind, const Outcome& o, Form form) {
  const bool ffa = form != Form::kGmem;
  switch (kind) {
    case Kind::kWrongErrno:
    case Kind::kSucceed:
      return ffa ? is_ffa_error(o, form) : o.kind == Outcome::Kind::kErrno;
    case Kind::kFail:
      return o.kind == Outcome::Kind::kOk && !(ffa && is_ffa_error(o, form));
    case Kind::kWrongContent:
    case Kind::kWrongCount:
    case Kind::kWrongReg:
    case Kind::kWrongState:
      return o.kind == Outcome::Kind::kOk;
    case Kind::kWrongPage:
      return false;  // its lie is in the re-read (observe), not in the outcome
  }
  return false;
}

uint64_t with_status(uint64_t x2, int32_t code) {
  return (x2 & ~uint64_t{0xffffffff}) | static_cast<uint32_t>(code);
}

Outcome perturb(Kind kind, Outcome o, int64_t page, Form form) {
  const bool ffa = form != Form::kGmem;
  const int status_reg = form == Form::kFfaVersion ? 0 : 2;  // where the error code or the value is
  switch (kind) {
    case Kind::kWrongErrno:
      if (ffa) {
        uint64_t& x = o.regs[status_reg];
        const int32_t code = static_cast<int32_t>(x & 0xffffffffu);
        x = with_status(x, code == ffa::kAborted ? ffa::kNoData : ffa::kAborted);
        return o;
      }
      return Outcome::err(o.value == ENOTRECOVERABLE ? EOWNERDEAD : ENOTRECOVERABLE);
    case Kind::kWrongContent:
      o.aux = ~o.aux;
      return o;
    case Kind::kWrongPage:
      return o;
    case Kind::kSucceed:
      if (form == Form::kFfaVersion) {  // a version no proxy of major 1.x above 1.0 answers with
        o.regs = {ffa::kVersion10, 0, 0, 0, 0, 0, 0, 0};
        return o;
      }
      if (ffa) {
        o.regs = {ffa::kFnSuccess32, 0, 0, 0, 0, 0, 0, 0};
        return o;
      }
      return Outcome::ok(0);
    case Kind::kFail:
      if (form == Form::kFfaVersion) {
        o.regs = {static_cast<uint64_t>(int64_t{ffa::kNotSupported}), 0, 0, 0, 0, 0, 0, 0};
        return o;
      }
      if (ffa) {
        o.regs = {ffa::kFnError, 0, static_cast<uint64_t>(int64_t{ffa::kAborted}), 0, 0, 0, 0, 0};
        return o;
      }
      return Outcome::err(EIO);
    case Kind::kWrongCount:
      o.value = o.value >= page ? o.value - page : o.value + page;
      return o;
    case Kind::kWrongReg:
      o.regs[status_reg] ^= 1;
      return o;
    case Kind::kWrongState:
      o.state = ~o.state;
      return o;
  }
  return o;
}

}  // namespace

FaultyTarget::FaultyTarget(std::unique_ptr<Target> inner, FaultSpec spec)
    : inner_(std::move(inner)), spec_(std::move(spec)) {
  identity_ = inner_->identity();
  identity_.target += "+fault(" + spec_.text + ")";
  // One page: the inner target's probed page size, else this process's.
  long ps = sysconf(_SC_PAGESIZE);
  page_ = ps > 0 ? ps : 4096;
  for (const auto& [name, value] : identity_.caps)
    if (name == "page_size" && value != 0) page_ = static_cast<int64_t>(value);
}

void FaultyTarget::begin(const Scenario& s) {
  seen_ = 0;
  fired_here_ = false;
  code_.reset();
  const AbiSpec& abi = abi_spec(s.abi);
  if (abi.abi == s.abi) code_ = op_code_by_name(abi, spec_.op);
  ffa_ = s.abi == Abi::kFfa;
  version_ = ffa_ && code_ == ffa::kOpVersion;
  inner_->begin(s);
}

Outcome FaultyTarget::exec(const Scenario& s, size_t i) {
  Outcome o = inner_->exec(s, i);
  const Form form = !ffa_ ? Form::kGmem : version_ ? Form::kFfaVersion : Form::kFfa;
  if (!code_ || i >= s.ops.size() || s.ops[i].code != *code_ || !eligible(spec_.kind, o, form)) return o;
  ++seen_;
  if (spec_.nth != 0 && seen_ != spec_.nth) return o;
  Outcome lie = perturb(spec_.kind, o, page_, form);
  if (!(lie == o)) count_fired();
  return lie;
}

void FaultyTarget::count_fired() {
  ++fired_;
  if (!fired_here_) ++scenarios_fired_;
  fired_here_ = true;
}

bool FaultyTarget::observe(const Scenario& s, size_t i, Contents* out) {
  if (!inner_->observe(s, i, out)) return false;
  if (spec_.kind != Kind::kWrongPage || !code_ || i >= s.ops.size() || s.ops[i].code != *code_) return true;
  // Eligible: a re-read of an observable file with at least one page. With no
  // page in memory the lie makes its first page appear, holding one byte of 1.
  const FileContent* file = nullptr;
  for (const FileContent& f : out->files)
    if (f.observable && f.page_count != 0 && !file) file = &f;
  if (!file) return true;
  ++seen_;
  if (spec_.nth != 0 && seen_ != spec_.nth) return true;
  if (out->pages.empty()) {
    uint64_t page_size = static_cast<uint64_t>(page_);
    out->pages.push_back({file->slot, file->first_page, std::vector<uint8_t>(page_size, 0)});
  }
  out->pages[0].bytes[0] ^= 1;
  count_fired();
  return true;
}

std::optional<FaultSpec> parse_fault_spec(std::string_view spec, std::string* error) {
  auto fail = [&](std::string msg) -> std::optional<FaultSpec> {
    if (error) *error = "fault spec '" + std::string(spec) + "': " + std::move(msg);
    return std::nullopt;
  };
  const size_t c1 = spec.find(':');
  if (c1 == std::string_view::npos)
    return fail("expected KIND:OP[:NTH], e.g. wrong-errno:write (known kinds: " + kind_list() + ")");
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
  if (!found) return fail("unknown KIND '" + std::string(kind) + "' (known kinds: " + kind_list() + ")");
  if (op.empty()) return fail("OP is empty (an op name, e.g. write)");
  if (!known_op(op)) return fail("unknown OP '" + std::string(op) + "' (known ops: " + op_list() + ")");
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

bool fault_applies(const FaultSpec& spec, const AbiSpec& abi, std::string* error) {
  auto fail = [&](const std::string& why) {
    if (error) *error = "fault spec '" + spec.text + "': " + why;
    return false;
  };
  const std::optional<uint8_t> code = op_code_by_name(abi, spec.op);
  if (!code) return fail("'" + spec.op + "' is not an op of the " + abi.name + " ABI");
  const std::string why = why_not(spec.kind, abi, abi.ops[*code]);
  if (!why.empty())
    return fail(std::string(kind_name(spec.kind)) + " does not apply to " + abi.name + " op '" + spec.op + "': " + why);
  return true;
}

std::vector<std::string> applicable_faults(const AbiSpec& abi) {
  std::vector<std::string> out;
  for (const OpSpec& op : abi.ops)
    for (const KindName& k : kKinds)
      if (why_not(k.kind, abi, op).empty()) out.push_back(std::string(k.name) + ":" + op.name);
  return out;
}

const AbiSpec* target_abi(const TargetIdentity& id) {
  const std::string_view p = id.profile;
  return abi_spec_by_name(p.substr(0, p.find('-')));
}

std::unique_ptr<FaultyTarget> wrap_faulty(std::unique_ptr<Target> inner, FaultSpec spec) {
  return std::make_unique<FaultyTarget>(std::move(inner), std::move(spec));
}

}  // namespace kconform
