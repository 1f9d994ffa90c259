// The rule registry: every rule of every model has a unique, upper-case ID
// with its ABI's prefix, and cites clause labels (AREA:NAME) that exist in its
// model's SPEC.md (models/<abi>/SPEC.md). Rules are never deleted.
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "models/common/rules.h"

namespace kconform {
namespace {

std::string models_dir() {
  const std::string here(__FILE__);
  const std::string common = here.substr(0, here.rfind('/'));
  return common.substr(0, common.rfind('/'));
}

std::string spec_of(const std::string& abi) {
  std::ifstream in(models_dir() + "/" + abi + "/SPEC.md");
  std::stringstream spec;
  spec << in.rdbuf();
  return spec.str();
}

// "SPEC.md GMEM:SIZE, GMEM:FLAGS (api.rst ...)" -> {"GMEM:SIZE", "GMEM:FLAGS"}
std::set<std::string> cited_labels(const std::string& cite) {
  const size_t paren = cite.find(" (");
  std::stringstream ls(cite.substr(8, paren == std::string::npos ? std::string::npos : paren - 8));
  std::set<std::string> out;
  for (std::string label; std::getline(ls, label, ',');) {
    label.erase(0, label.find_first_not_of(' '));
    out.insert(label);
  }
  return out;
}

TEST(Rules, IdsAreUniqueAndCiteLabelsOfTheirModelsSpec) {
  const std::map<std::string, std::string> prefix = {{"gmem", "GMEM."}, {"ffa", "FFA."}};
  std::map<std::string, std::string> specs;
  std::map<std::string, size_t> count;
  std::set<std::string> ids;
  auto rules = all_rules();
  for (size_t i = 1; i < rules.size(); ++i) {
    const std::string id = rules[i].id, abi = rules[i].abi, cite = rules[i].citation;
    ASSERT_TRUE(prefix.count(abi)) << id << ": unknown ABI " << abi;
    ++count[abi];
    EXPECT_TRUE(ids.insert(id).second) << id << " twice";
    EXPECT_EQ(id.rfind(prefix.at(abi), 0), 0u) << id;
    for (char c : id) EXPECT_FALSE(std::islower(static_cast<unsigned char>(c))) << id;
    ASSERT_EQ(cite.rfind("SPEC.md ", 0), 0u) << id << " cites " << cite;
    if (!specs.count(abi)) specs[abi] = spec_of(abi);
    ASSERT_FALSE(specs[abi].empty()) << "models/" << abi << "/SPEC.md";
    for (const std::string& label : cited_labels(cite))
      EXPECT_NE(specs[abi].find("**" + label + "**"), std::string::npos) << id << " cites " << label;
  }
  EXPECT_STREQ(rules[1].id, "GMEM.CREATE.SIZE");
  EXPECT_STREQ(rules[kFfaRulesBegin + 1].id, "FFA.HARNESS.SLOTS");
  // Rules are never deleted: these only grow.
  EXPECT_GE(count["gmem"], 35u);
  EXPECT_GE(count["ffa"], 85u);
}

}  // namespace
}  // namespace kconform
