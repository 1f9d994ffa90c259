// The case-generation algorithm (generate.h) and the scenario helpers.
#include "harness/gen/generate.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "harness/scenario/abi.h"
#include "harness/scenario/codec.h"

namespace kconform::gen {
namespace {

uint64_t lowbit(uint64_t m) { return m & (~m + 1); }
uint64_t highbit(uint64_t m) {
  uint64_t h = 0;
  for (uint64_t b = 1; b; b <<= 1)
    if (m & b) h = b;
  return h;
}

// rel(a, b) computed on the wide or the narrow terms.
z3::expr relation(const Cond& c, bool narrow) {
  z3::context& ctx = c.a.wide.ctx();
  const unsigned bits = narrow ? c.a.bits : kWide;
  z3::expr a = narrow ? c.a.narrow : c.a.wide;
  z3::expr b = c.b.wide;
  if (narrow) {
    const Term& tb = c.b;
    b = tb.bits == bits ? tb.narrow
                        : (tb.bits < bits ? z3::zext(tb.narrow, bits - tb.bits) : tb.narrow.extract(bits - 1, 0));
  }
  switch (c.rel) {
    case Rel::kLe: return z3::ule(a, b);
    case Rel::kLt: return z3::ult(a, b);
    case Rel::kEq: return a == b;
    case Rel::kNe: return a != b;
    case Rel::kAligned: return z3::urem(a, ctx.bv_val(c.m, bits)) == ctx.bv_val(0, bits);
    case Rel::kMaskZero: return (a & ctx.bv_val(c.m, bits)) == ctx.bv_val(0, bits);
    case Rel::kCustom: return c.custom;
  }
  return ctx.bool_val(true);
}

z3::expr holds(const Cond& c) { return z3::implies(c.guard, relation(c, false)); }

struct Query {
  std::string kind;  // "valid", "break-<id>", "edge-<id>-<tag>"
  std::string what;  // the comment's first line
  int target = -1;   // the condition aimed at, or -1
  z3::expr pin;      // what the case must satisfy besides the others
};

// The boundary queries of one condition.
std::vector<Query> edges(const Cond& c, int i) {
  z3::context& ctx = c.a.wide.ctx();
  const z3::expr& a = c.a.wide;
  const z3::expr& b = c.b.wide;
  auto w = [&](uint64_t v) { return ctx.bv_val(v, kWide); };
  std::vector<Query> q;
  auto add = [&](const std::string& tag, const std::string& what, z3::expr pin) {
    q.push_back({"edge-" + c.id + "-" + tag, what, i, c.guard && pin});
  };
  switch (c.rel) {
    case Rel::kLe:
      add("inside", "just inside '" + c.text + "'", z3::ule(a, b) && z3::ult(b, a + w(c.granule)));
      add("outside", "just outside '" + c.text + "' (by 1)", a == b + w(1));
      if (c.granule > 1) add("outside-granule", "just outside '" + c.text + "' (by one granule)", a == b + w(c.granule));
      break;
    case Rel::kLt:
      add("inside", "just inside '" + c.text + "'",
          c.granule > 1 ? z3::ult(a, b) && z3::ule(b, a + w(c.granule)) : a + w(1) == b);
      add("outside", "just outside '" + c.text + "' (equal)", a == b);
      break;
    case Rel::kEq:
      add("above", "one above '" + c.text + "'", a == b + w(1));
      add("below", "one below '" + c.text + "'", a + w(1) == b);
      break;
    case Rel::kNe:
      add("inside", "just inside '" + c.text + "'", a == b + w(c.granule));
      break;
    case Rel::kAligned:
      add("inside", "smallest non-zero value meeting '" + c.text + "'",
          relation(c, false) && a != w(0));
      add("plus1", "one past a multiple: '" + c.text + "' broken", z3::urem(a, w(c.m)) == w(1));
      add("minus1", "one short of a multiple: '" + c.text + "' broken", z3::urem(a, w(c.m)) == w(c.m - 1));
      break;
    case Rel::kMaskZero:
      add("lowbit", "lowest forbidden bit set: '" + c.text + "' broken", (a & w(c.m)) == w(lowbit(c.m)));
      if (highbit(c.m) != lowbit(c.m))
        add("highbit", "highest forbidden bit set: '" + c.text + "' broken", (a & w(c.m)) == w(highbit(c.m)));
      break;
    case Rel::kCustom:
      break;
  }
  if (c.wraps) {
    q.push_back({"edge-" + c.id + "-wrap",
                 "unsigned wrap-around: '" + c.text + "' holds in " + std::to_string(c.a.bits) +
                     "-bit arithmetic but not exactly",
                 i, c.guard && relation(c, true) && !relation(c, false)});
  }
  return q;
}

// Solves hard constraints, preferring small values: the preferences are
// assumptions, and those in an unsat core are dropped until sat (or none left).
bool solve(z3::context& ctx, const std::vector<z3::expr>& hard, const std::vector<z3::expr>& prefs,
           z3::model* out) {
  z3::solver s(ctx);
  for (const z3::expr& h : hard) s.add(h);
  std::vector<z3::expr> lits;
  for (size_t i = 0; i < prefs.size(); ++i) {
    z3::expr p = ctx.bool_const(("pref!" + std::to_string(i)).c_str());
    s.add(z3::implies(p, prefs[i]));
    lits.push_back(p);
  }
  std::vector<bool> active(prefs.size(), true);
  for (;;) {
    z3::expr_vector assumptions(ctx);
    for (size_t i = 0; i < lits.size(); ++i)
      if (active[i]) assumptions.push_back(lits[i]);
    z3::check_result r = s.check(assumptions);
    if (r == z3::sat) {
      *out = s.get_model();
      return true;
    }
    if (r != z3::unsat) return false;
    z3::expr_vector core = s.unsat_core();
    if (core.size() == 0) return false;
    bool dropped = false;
    for (unsigned k = 0; k < core.size(); ++k)
      for (size_t i = 0; i < lits.size(); ++i)
        if (active[i] && z3::eq(core[k], lits[i])) active[i] = false, dropped = true;
    if (!dropped) return false;
  }
}

// The fewest other conditions a case must break besides what q pins, when it
// cannot keep every other condition: none of them at an earlier stage than the
// condition q aims at (such a case would end before reaching it; false, with
// *unreachable set). False without *unreachable: the pin itself is unsatisfiable.
bool fewest_also_broken(z3::context& ctx, const Function& f, const Query& q, const std::vector<z3::expr>& hard,
                        std::vector<size_t>* also, bool* unreachable) {
  *unreachable = false;
  z3::solver s(ctx);
  for (const z3::expr& h : hard) s.add(h);
  if (s.check() != z3::sat) return false;
  const unsigned stage = f.conds[q.target].stage;
  z3::expr_vector broken(ctx);
  std::vector<size_t> which;
  for (size_t j = 0; j < f.conds.size(); ++j) {
    if (static_cast<int>(j) == q.target) continue;
    if (f.conds[j].stage < stage) {
      s.add(holds(f.conds[j]));
      continue;
    }
    z3::expr b = ctx.bool_const(("broken!" + std::to_string(j)).c_str());
    s.add(b == !holds(f.conds[j]));
    broken.push_back(b);
    which.push_back(j);
  }
  if (s.check() != z3::sat) {
    *unreachable = true;
    return false;
  }
  for (unsigned k = 1; k <= broken.size(); ++k) {
    s.push();
    s.add(z3::atmost(broken, k));
    const z3::check_result r = s.check();
    if (r == z3::sat) {
      z3::model m = s.get_model();
      for (unsigned i = 0; i < broken.size(); ++i)
        if (m.eval(broken[i], true).is_true()) also->push_back(which[i]);
      return true;
    }
    s.pop();
    if (r != z3::unsat) return false;
  }
  return false;
}

}  // namespace

std::vector<Case> generate(const Function& f, GenStats* stats) {
  z3::context& ctx = f.params.front().term.wide.ctx();
  std::vector<z3::expr> prefs;
  for (const Param& p : f.params)
    if (p.prefer_max) prefs.push_back(z3::ule(p.term.wide, ctx.bv_val(p.prefer_max, kWide)));
  prefs.insert(prefs.end(), f.prefer.begin(), f.prefer.end());

  std::vector<Query> queries;
  queries.push_back({"valid", "every condition holds", -1, ctx.bool_val(true)});
  for (size_t i = 0; i < f.conds.size(); ++i) {
    const Cond& c = f.conds[i];
    queries.push_back({"break-" + c.id, "breaks only '" + c.text + "'", static_cast<int>(i),
                       c.guard && !relation(c, false)});
    for (Query& e : edges(c, static_cast<int>(i))) queries.push_back(std::move(e));
  }

  std::vector<Case> cases;
  std::set<std::vector<uint8_t>> seen;
  for (const Query& q : queries) {
    ++stats->queries;
    std::vector<z3::expr> hard = f.context;
    hard.push_back(q.pin);
    std::vector<z3::expr> strict = hard;
    for (size_t j = 0; j < f.conds.size(); ++j)
      if (static_cast<int>(j) != q.target) strict.push_back(holds(f.conds[j]));
    z3::model m(ctx);
    // Other conditions the case breaks because no case of this query can keep
    // them all: the fewest, named in the case's name.
    std::vector<size_t> also;
    if (!solve(ctx, strict, prefs, &m)) {
      if (q.kind.rfind("break-", 0) == 0) stats->not_isolable.push_back(f.name + "/" + q.kind.substr(6));
      if (q.target < 0) {
        ++stats->unsat;
        continue;
      }
      if (!f.fewest_others) {
        // Every other condition holds, or holds as the implementation's
        // W-bit arithmetic computes it (the same wrap-around seen by another
        // condition): those broken exactly are named in the case. A case
        // that would break any other condition outright is not generated.
        std::vector<z3::expr> narrow = hard;
        std::vector<z3::expr> keep;  // preferences: as many held exactly as can be
        for (size_t j = 0; j < f.conds.size(); ++j) {
          if (static_cast<int>(j) == q.target) continue;
          const Cond& o = f.conds[j];
          if (o.wraps) {
            narrow.push_back(holds(o) || z3::implies(o.guard, relation(o, true)));
            keep.push_back(holds(o));
          } else {
            narrow.push_back(holds(o));
          }
        }
        keep.insert(keep.end(), prefs.begin(), prefs.end());
        if (!solve(ctx, narrow, keep, &m)) {
          stats->not_generated.push_back(f.name + "/" + q.kind);
          ++stats->unsat;
          continue;
        }
        for (size_t j = 0; j < f.conds.size(); ++j)
          if (static_cast<int>(j) != q.target && m.eval(holds(f.conds[j]), true).is_false()) also.push_back(j);
      } else {
        bool unreachable = false;
        if (!fewest_also_broken(ctx, f, q, hard, &also, &unreachable)) {
          if (unreachable) {
            stats->unreachable.push_back(f.name + "/" + q.kind);
          } else {
            ++stats->unsat;
          }
          continue;
        }
        std::vector<z3::expr> relaxed = hard;
        for (size_t j = 0; j < f.conds.size(); ++j) {
          if (static_cast<int>(j) == q.target) continue;
          const bool broken = std::find(also.begin(), also.end(), j) != also.end();
          relaxed.push_back(broken ? !holds(f.conds[j]) : holds(f.conds[j]));
        }
        if (!solve(ctx, relaxed, prefs, &m)) {
          ++stats->unsat;
          continue;
        }
      }
      ++stats->relaxed;
    }
    ++stats->sat;
    Solution sol(m, f.params);
    Case c;
    c.scenario = f.build(sol);
    c.scenario.name = "z3/" + f.abi + "/" + f.name + "/" + q.kind;
    for (size_t j : also) c.scenario.name += "+" + f.conds[j].id;
    std::vector<uint8_t> key = encode_binary([&] {
      Scenario k = c.scenario;
      k.name.clear();
      return k;
    }());
    if (!seen.insert(key).second) {
      ++stats->duplicates;
      continue;
    }
    // Which conditions the solution breaks, evaluated on it (the label's truth).
    // Besides the target, exactly the conditions the name lists are broken.
    std::string broken;
    for (size_t j = 0; j < f.conds.size(); ++j) {
      const Cond& cond = f.conds[j];
      const bool is_broken = m.eval(holds(cond), true).is_false();
      if (is_broken) broken += (broken.empty() ? "" : ", ") + cond.id + " [" + cond.rule + "]";
      const bool named = std::find(also.begin(), also.end(), j) != also.end();
      if (static_cast<int>(j) != q.target && is_broken != named) {
        std::fprintf(stderr, "kconform-gen: %s: condition %s is %s but the name says otherwise\n",
                     c.scenario.name.c_str(), cond.id.c_str(), is_broken ? "broken" : "kept");
        std::abort();
      }
    }
    const std::string rule = q.target >= 0 ? f.conds[q.target].rule : "";
    std::string with;
    for (size_t j : also)
      with += (with.empty() ? "" : ", ") + f.conds[j].id + " [" + f.conds[j].rule + "]";
    c.comment.push_back("Z3 " + q.what + (rule.empty() ? "" : " [" + rule + "]") +
                        (with.empty() ? "" : "; no case keeps every other condition: also breaks " + with));
    c.comment.push_back("  " + sol.describe());
    c.comment.push_back("  breaks: " + (broken.empty() ? std::string("nothing (a valid call)") : broken));
    std::string err;
    if (!validate(c.scenario, &err)) {
      std::fprintf(stderr, "kconform-gen: %s: generated an invalid scenario: %s\n", c.scenario.name.c_str(),
                   err.c_str());
      std::abort();
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

std::string format_cases(const Function& f, const std::vector<Case>& cases, const GenStats* stats) {
  std::string out;
  out += "# Generated by kconform-gen (harness/gen, Z3) -- do not edit; regenerate with ./kconform gen\n";
  out += "# " + f.abi + " " + f.name + ": " + f.doc + "\n";
  out += "# Conditions (each case says which it targets and which it breaks):\n";
  bool staged = false;
  for (const Cond& c : f.conds) staged |= c.stage != 0;
  if (staged)
    out += "# (stage N: the model checks stage by stage; a condition broken at one stage ends the call before the next)\n";
  for (const Cond& c : f.conds)
    out += "#   " + c.id + ": " + c.text + "  [" + c.rule + "]" + (staged ? " stage " + std::to_string(c.stage) : "") +
           (c.may_succeed ? " (broken alone, the call may still succeed)" : "") + "\n";
  if (stats)
    for (const std::string& u : stats->unreachable)
      out += "# Not generated: " + u.substr(u.find('/') + 1) +
             " (every such case also breaks a condition of an earlier stage, which ends the call first)\n";
  if (stats)
    for (const std::string& u : stats->not_generated)
      out += "# Not generated: " + u.substr(u.find('/') + 1) +
             " (no such case keeps every other condition, exactly or in the implementation's arithmetic)\n";
  for (const Case& c : cases) {
    out += "\n";
    for (const std::string& line : c.comment) out += "# " + line + "\n";
    out += format_text(c.scenario);
  }
  return out;
}

void add_op(Scenario& s, const std::string& name,
            const std::vector<std::pair<std::string, uint64_t>>& ints,
            const std::vector<std::pair<std::string, std::vector<uint8_t>>>& bytes) {
  const AbiSpec& abi = abi_spec(s.abi);
  auto code = op_code_by_name(abi, name);
  if (!code) {
    std::fprintf(stderr, "kconform-gen: no op %s\n", name.c_str());
    std::abort();
  }
  const OpSpec& spec = abi.ops[*code];
  Op op;
  op.code = *code;
  size_t used = 0;
  for (size_t i = 0; i < spec.args.size(); ++i) {
    const ArgSpec& a = spec.args[i];
    bool set = false;
    for (const auto& [n, v] : ints)
      if (n == a.name) op.args[i] = v, set = true, ++used;
    for (const auto& [n, data] : bytes)
      if (n == a.name) {
        op.args[i] = s.blobs.size();
        s.blobs.push_back(data);
        set = true, ++used;
      }
    if (!set) {
      if (!a.optional) {
        std::fprintf(stderr, "kconform-gen: op %s needs argument %s\n", name.c_str(), a.name);
        std::abort();
      }
      op.args[i] = a.dflt;
    }
  }
  if (used != ints.size() + bytes.size()) {
    std::fprintf(stderr, "kconform-gen: op %s: unknown argument name\n", name.c_str());
    std::abort();
  }
  s.ops.push_back(op);
}

void require(Scenario& s, const std::string& cap) {
  for (const NamedValue& c : abi_spec(s.abi).capabilities)
    if (cap == c.name) {
      s.requires_caps |= 1u << c.value;
      return;
    }
  std::fprintf(stderr, "kconform-gen: no capability %s\n", cap.c_str());
  std::abort();
}

}  // namespace kconform::gen
