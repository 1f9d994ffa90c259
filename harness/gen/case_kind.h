// What a generated case's name says it aims at (the cases tests read the
// names the generator writes, generate.h): "valid", "break-<cond>" or
// "edge-<cond>-<tag>" (the target condition is broken unless tag is
// "inside"), then "+<cond>" for each other condition the case breaks.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "harness/gen/constraints.h"

namespace kconform::gen {

inline const Cond* cond_by_id(const Function& f, const std::string& id) {
  for (const Cond& c : f.conds)
    if (c.id == id) return &c;
  return nullptr;
}

struct Aim {
  const Cond* target = nullptr;       // null for "valid"
  std::vector<const Cond*> broken;    // every condition the name says is broken
};

// False with why for a kind that names no condition of f.
inline bool parse_kind(const Function& f, const std::string& kind, Aim* aim, std::string* why) {
  std::vector<std::string> parts;
  std::stringstream ss(kind);
  for (std::string p; std::getline(ss, p, '+');) parts.push_back(p);
  if (parts.empty()) return *why = "empty kind", false;
  const std::string& main = parts[0];
  if (main == "valid") {
    // nothing aimed at
  } else if (main.rfind("break-", 0) == 0) {
    aim->target = cond_by_id(f, main.substr(6));
    if (!aim->target) return *why = "no condition " + main.substr(6), false;
    aim->broken.push_back(aim->target);
  } else if (main.rfind("edge-", 0) == 0) {
    std::string tag;
    for (const Cond& c : f.conds) {
      const std::string pre = "edge-" + c.id + "-";
      if (main.rfind(pre, 0) == 0 && (!aim->target || c.id.size() > aim->target->id.size())) {
        aim->target = &c;
        tag = main.substr(pre.size());
      }
    }
    if (!aim->target) return *why = "no condition in " + main, false;
    if (tag != "inside") aim->broken.push_back(aim->target);
  } else {
    return *why = "kind " + main + " is not valid, break-* or edge-*", false;
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    const Cond* c = cond_by_id(f, parts[i]);
    if (!c) return *why = "no condition " + parts[i], false;
    aim->broken.push_back(c);
  }
  return true;
}

}  // namespace kconform::gen
