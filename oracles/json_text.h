// JSON text written directly into a string, byte for byte as
// nlohmann::json::dump() prints the same values (keys are the caller's to
// order as json's std::map would: alphabetically). For the records written per
// op (the verdict stream, the crash marker's op in flight), where building a
// json tree cost more than the op. Tested against json::dump() in
// verdict_json_test.cc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kconform {

// A JSON string: \" \\ \b \f \n \r \t, other control bytes as \u00xx, UTF-8
// as it is; a string that is not UTF-8 is refused as nlohmann refuses it
// (json::type_error).
void json_put_string(std::string& o, std::string_view v);
// Whether v is quoted by json_put_string as it is (no byte below 0x20, '"',
// '\\' or from 0x80 up): then '"' + v + '"' is its JSON.
bool json_plain(std::string_view v);
// "key": preceded by a comma unless o holds only the opening brace.
void json_put_key(std::string& o, std::string_view key);
void json_put_uint(std::string& o, uint64_t v);

// A scenario's fields as the per-op records print them, quoted again only
// when the scenario changes (the verdict stream's op records and the crash
// marker's op in flight): file_index is the "file" value through the "index"
// value (`"<file>","index":<index>`), name the "scenario" value.
struct ScenarioJson {
  // Returns whether they changed (were quoted again).
  bool update(const std::string& scenario, const std::string& file, uint64_t index);
  std::string file_index, name;

 private:
  std::string scenario_, file_;
  uint64_t index_ = UINT64_MAX;
  bool set_ = false;
};

}  // namespace kconform
