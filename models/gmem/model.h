// The guest_memfd reference model, written from the write series' cover
// letter, Documentation/virt/kvm/api.rst and the kselftest expectations
// (clauses in SPEC.md, rules in rules.def).
#pragma once

#include <memory>

#include "models/gmem/profile.h"
#include "models/model.h"

namespace kconform::gmem {

std::unique_ptr<Model> make_model(const Profile& profile);

}  // namespace kconform::gmem
