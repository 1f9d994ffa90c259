// The vocabulary of the Z3 edge-case generator: parameters, terms computed
// both mathematically (wide, 128 bits) and as a W-bit implementation would
// (narrow, wrapping), atomic validity conditions tagged with the model rule
// they stand for, and one ABI function = its parameters, its conditions, the
// context every case keeps, and how a solution becomes a scenario.
//
// The conditions restate the models' rules (models/gmem/SPEC.md + rules.def,
// models/ffa/SPEC.md + reclaim2_abi.h) as constraints; the models stay
// the oracle. A case generated here is only a well-aimed input.
#pragma once

#include <z3++.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "harness/scenario/scenario.h"

namespace kconform::gen {

// Wide enough for every exact sum and product of the parameters (64-bit
// addresses plus 4K * 32-bit counts; 32 x 32-bit products), small enough to solve fast.
inline constexpr unsigned kWide = 72;

// A value: wide is exact (no wrap-around below 2^128), narrow is computed in
// `bits` bits as C code with that register width would compute it.
struct Term {
  z3::expr wide;
  z3::expr narrow;
  unsigned bits;
};

class Vocab {
 public:
  explicit Vocab(z3::context& c) : c_(c) {}
  z3::context& ctx() { return c_; }
  // A parameter of the given register width.
  Term var(const std::string& name, unsigned bits);
  Term cst(uint64_t v, unsigned bits);
  Term add(const Term& a, const Term& b);
  Term mul(const Term& a, uint64_t k);
  Term bitand_(const Term& a, uint64_t mask);
  Term mulv(const Term& a, const Term& b);  // a * b (narrow: at a's width)
  Term ite(const z3::expr& c, const Term& a, const Term& b);
  // A wide-only constant (e.g. 2^64), for conditions with no narrow form.
  Term wide_pow2(unsigned exp, unsigned bits);
  // The same value seen at another register width (zero-extended or truncated).
  Term as(const Term& a, unsigned bits);
  z3::expr wide(uint64_t v) { return c_.bv_val(v, kWide); }

 private:
  z3::context& c_;
};

enum class Rel : uint8_t {
  kLe,       // a <= b
  kLt,       // a < b
  kEq,       // a == b
  kNe,       // a != b
  kAligned,  // a % m == 0
  kMaskZero, // a & m == 0
  kCustom,   // any formula (holds): broken, never bounded
};

// One atomic validity condition.
struct Cond {
  std::string id;    // e.g. "offset-align"
  std::string rule;  // the model rule it stands for, e.g. "GMEM.WRITE.ALIGN"
  std::string text;  // e.g. "offset % PAGE_SIZE == 0"
  Rel rel = Rel::kLe;
  Term a, b;         // b unused for kAligned/kMaskZero
  uint64_t m = 0;    // kAligned modulus, kMaskZero mask
  uint64_t granule = 1;  // kLe/kLt: "just inside" means within one granule of the bound; kNe: one granule off
  bool wraps = false;    // has a narrow computation that can wrap: generate the wrap-around case
  z3::expr guard;        // the condition applies only where guard holds (true: always)
  z3::expr custom;       // kCustom: the formula
  // The model's guard order: it checks a function's conditions stage by stage,
  // and a condition broken at one stage ends the call before the next (e.g. the
  // harness refuses an oversized write before the write ABI is consulted). A
  // case whose other broken conditions sit at an earlier stage than the one it
  // aims at never reaches it, so it is not generated.
  unsigned stage = 0;
  // Broken alone, the call may still succeed (a write cut short at EOF, a
  // zero-length write, a size the kernel may refuse): the rule is evaluated on
  // its allowed side. Otherwise breaking it puts the call on the rule's
  // forbidden side (the rule demands an error).
  bool may_succeed = false;
};

// A parameter the scenario builder reads from a solution.
struct Param {
  std::string name;
  Term term;
  uint64_t prefer_max = 0;  // soft: a case prefers values <= this (0: no preference)
};

class Solution {
 public:
  Solution(const z3::model& m, const std::vector<Param>& params);
  uint64_t operator[](const std::string& name) const;
  std::string describe() const;  // "offset=0x1000 len=0x2000 ..."

 private:
  std::vector<std::pair<std::string, uint64_t>> values_;
};

struct Function {
  std::string abi;   // "gmem" or "ffa"
  std::string name;  // file stem and scenario name part, e.g. "pwrite"
  std::string doc;   // one line for the file header
  std::vector<Param> params;
  std::vector<Cond> conds;
  std::vector<z3::expr> context;  // kept by every case
  // Soft, as Param::prefer_max: values a case keeps where it can (after the
  // parameters' preferences), e.g. the canonical value of a field that
  // several conditions bound.
  std::vector<z3::expr> prefer;
  // A case that cannot keep every other condition: true, it breaks the fewest
  // others it must (named in the case); false, it may break only conditions
  // whose W-bit computation still holds (named in the case), else it is not
  // generated (FF-A: the fewest-others search over its 21-29 conditions takes
  // minutes per function with Z3 4.8).
  bool fewest_others = false;
  // Builds the scenario (ops, requires) for a solution; name is set by the caller.
  std::function<Scenario(const Solution&)> build;
};

// Conditions' constructors.
Cond le(std::string id, std::string rule, std::string text, Term a, Term b, uint64_t granule = 1,
        bool wraps = false);
Cond lt(std::string id, std::string rule, std::string text, Term a, Term b, uint64_t granule = 1);
Cond eq(std::string id, std::string rule, std::string text, Term a, Term b, bool wraps = false);
Cond ne(std::string id, std::string rule, std::string text, Term a, Term b, uint64_t granule = 1);
Cond aligned(std::string id, std::string rule, std::string text, Term a, uint64_t m);
Cond mask_zero(std::string id, std::string rule, std::string text, Term a, uint64_t mask);
Cond custom(std::string id, std::string rule, std::string text, z3::expr holds);
// The same condition, applying only where guard holds.
Cond when(z3::expr guard, Cond c);
// The same condition, checked at a later stage of the model's guard order.
Cond at_stage(unsigned stage, Cond c);
// The same condition, whose breaking the model permits (Cond::may_succeed).
Cond may_succeed(Cond c);

// The machine facts a generation run is for.
struct GenConfig {
  uint64_t gmem_page = 4096;                  // host PAGE_SIZE for guest_memfd
  std::vector<uint64_t> ffa_pages = {4096, 16384};  // host PAGE_SIZEs of the EL2 builds
};

std::vector<Function> gmem_functions(Vocab& v, const GenConfig& cfg);
std::vector<Function> ffa_functions(Vocab& v, const GenConfig& cfg);

}  // namespace kconform::gen
