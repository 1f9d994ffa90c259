// Terms, conditions and solutions of the generator's vocabulary (constraints.h).
#include <cstdio>
#include <stdexcept>

#include "harness/gen/constraints.h"

namespace kconform::gen {

Term Vocab::var(const std::string& name, unsigned bits) {
  z3::expr n = c_.bv_const(name.c_str(), bits);
  return {z3::zext(n, kWide - bits), n, bits};
}

Term Vocab::cst(uint64_t v, unsigned bits) {
  uint64_t masked = bits >= 64 ? v : (v & ((1ull << bits) - 1));
  return {c_.bv_val(v, kWide), c_.bv_val(masked, bits), bits};
}

Term Vocab::add(const Term& a, const Term& b) {
  Term bb = as(b, a.bits);
  return {a.wide + b.wide, a.narrow + bb.narrow, a.bits};
}

Term Vocab::mul(const Term& a, uint64_t k) {
  return {a.wide * c_.bv_val(k, kWide), a.narrow * c_.bv_val(k, a.bits), a.bits};
}

Term Vocab::bitand_(const Term& a, uint64_t mask) {
  return {a.wide & c_.bv_val(mask, kWide), a.narrow & c_.bv_val(mask, a.bits), a.bits};
}

Term Vocab::mulv(const Term& a, const Term& b) {
  Term bb = as(b, a.bits);
  return {a.wide * b.wide, a.narrow * bb.narrow, a.bits};
}

Term Vocab::ite(const z3::expr& c, const Term& a, const Term& b) {
  Term bb = as(b, a.bits);
  return {z3::ite(c, a.wide, b.wide), z3::ite(c, a.narrow, bb.narrow), a.bits};
}

Term Vocab::wide_pow2(unsigned exp, unsigned bits) {
  z3::expr one = c_.bv_val(1, kWide);
  return {z3::shl(one, c_.bv_val(exp, kWide)), c_.bv_val(0, bits), bits};
}

Term Vocab::as(const Term& a, unsigned bits) {
  if (bits == a.bits) return a;
  z3::expr n = bits > a.bits ? z3::zext(a.narrow, bits - a.bits) : a.narrow.extract(bits - 1, 0);
  return {a.wide, n, bits};
}

namespace {
Cond make(std::string id, std::string rule, std::string text, Rel rel, Term a, Term b) {
  z3::expr t = a.wide.ctx().bool_val(true);
  Cond c{std::move(id), std::move(rule), std::move(text), rel, a, b, 0, 1, false, t, t, 0, false};
  return c;
}
}  // namespace

Cond le(std::string id, std::string rule, std::string text, Term a, Term b, uint64_t granule, bool wraps) {
  Cond c = make(std::move(id), std::move(rule), std::move(text), Rel::kLe, a, b);
  c.granule = granule;
  c.wraps = wraps;
  return c;
}
Cond lt(std::string id, std::string rule, std::string text, Term a, Term b, uint64_t granule) {
  Cond c = make(std::move(id), std::move(rule), std::move(text), Rel::kLt, a, b);
  c.granule = granule;
  return c;
}
Cond eq(std::string id, std::string rule, std::string text, Term a, Term b, bool wraps) {
  Cond c = make(std::move(id), std::move(rule), std::move(text), Rel::kEq, a, b);
  c.wraps = wraps;
  return c;
}
Cond ne(std::string id, std::string rule, std::string text, Term a, Term b, uint64_t granule) {
  Cond c = make(std::move(id), std::move(rule), std::move(text), Rel::kNe, a, b);
  c.granule = granule;
  return c;
}
Cond aligned(std::string id, std::string rule, std::string text, Term a, uint64_t m) {
  Cond c = make(std::move(id), std::move(rule), std::move(text), Rel::kAligned, a, a);
  c.m = m;
  return c;
}
Cond mask_zero(std::string id, std::string rule, std::string text, Term a, uint64_t mask) {
  Cond c = make(std::move(id), std::move(rule), std::move(text), Rel::kMaskZero, a, a);
  c.m = mask;
  return c;
}

Cond custom(std::string id, std::string rule, std::string text, z3::expr holds) {
  z3::context& ctx = holds.ctx();
  Term zero{ctx.bv_val(0, kWide), ctx.bv_val(0, 1), 1};
  Cond c = make(std::move(id), std::move(rule), std::move(text), Rel::kCustom, zero, zero);
  c.custom = holds;
  return c;
}

Cond when(z3::expr guard, Cond c) {
  c.guard = guard;
  return c;
}

Cond at_stage(unsigned stage, Cond c) {
  c.stage = stage;
  return c;
}

Cond may_succeed(Cond c) {
  c.may_succeed = true;
  return c;
}

Solution::Solution(const z3::model& m, const std::vector<Param>& params) {
  for (const Param& p : params) {
    z3::expr v = m.eval(p.term.narrow, true);
    values_.emplace_back(p.name, v.get_numeral_uint64());
  }
}

uint64_t Solution::operator[](const std::string& name) const {
  for (const auto& [n, v] : values_)
    if (n == name) return v;
  throw std::logic_error("kconform-gen: no parameter " + name);
}

std::string Solution::describe() const {
  std::string out;
  char buf[64];
  for (const auto& [n, v] : values_) {
    std::snprintf(buf, sizeof buf, "%s%s=%#llx", out.empty() ? "" : " ", n.c_str(),
                  static_cast<unsigned long long>(v));
    out += buf;
  }
  return out;
}

}  // namespace kconform::gen
