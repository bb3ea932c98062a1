#include "Tune/Database.h"

#include <cstdint>
#include <stdexcept>

#include "Runtime/JsonInt.h"
#include "kiln/error.hpp"
#include "kiln/files.hpp"

namespace kiln::tune::detail {

using nlohmann::json;

namespace {
const char* const kStringFields[] = {"backend", "device", "driver", "target", "compiler", "kiln", "llvm"};

std::string firstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

void checkEntry(const json& e) {
  if (!e.is_object() || !e.value("signature", json()).is_string() || !e.value("shape_class", json()).is_string() ||
      !e.value("fingerprint", json()).is_object() || !e.value("chosen", json()).is_object() ||
      !e["chosen"].value("config", json()).is_object())
    throw std::runtime_error("an entry lacks signature, shape_class, fingerprint or chosen.config");
  const json& fp = e["fingerprint"];
  for (const char* f : kStringFields)
    if (fp.contains(f) && !fp[f].is_string())
      throw std::runtime_error(std::string("an entry's fingerprint.") + f + " is " + fp[f].dump() + ", not a string");
  if (fp.contains("sm_count") && !(kiln::detail::isJsonInt<int>(fp["sm_count"]) && fp["sm_count"].get<int>() >= 0))
    throw std::runtime_error("an entry's fingerprint.sm_count is " + fp["sm_count"].dump() + ", not a count");
  for (const auto& [name, v] : e["chosen"]["config"].items())
    if (!kiln::detail::isJsonInt<int64_t>(v)) throw std::runtime_error("an entry's chosen.config." + name + " is " + v.dump() + ", not an integer");
}
} // namespace

json parseDatabase(const std::string& text, const std::string& path) {
  try {
    json db = json::parse(text);
    if (!db.is_object() || !db.contains("entries") || !db["entries"].is_array()) throw std::runtime_error("no entries array");
    for (const json& e : db["entries"]) checkEntry(e); // every field replay reads, with its type
    if (db.value("format", json()) != json(1))
      throw std::runtime_error("format " + db.value("format", json()).dump() + ", where this kiln reads format 1");
    return db;
  } catch (const std::exception& e) {
    throw Error(ErrorKind::InvalidArgument, "tuning database '" + path + "' is not a kiln tuning database (" +
                                                firstLine(e.what()) + "); move it away or name another file");
  }
}

json loadDatabase(const std::string& path) {
  if (!path_exists(path)) return json{{"format", 1}, {"entries", json::array()}};
  return parseDatabase(read_file(path, "tuning database", kMaxDatabaseBytes), path);
}

json toJson(const Fingerprint& f) {
  return {{"backend", f.backend}, {"device", f.device}, {"sm_count", f.sm_count}, {"driver", f.driver},
          {"target", f.target}, {"compiler", f.compiler}, {"kiln", f.kiln}, {"llvm", f.llvm}};
}

Fingerprint fingerprintFrom(const json& j) {
  Fingerprint f;
  f.backend = j.value("backend", ""), f.device = j.value("device", ""), f.sm_count = j.value("sm_count", 0);
  f.driver = j.value("driver", ""), f.target = j.value("target", ""), f.compiler = j.value("compiler", "");
  f.kiln = j.value("kiln", ""), f.llvm = j.value("llvm", "");
  return f;
}

Config configFrom(const json& j) {
  Config c;
  c.params = j.get<std::map<std::string, int64_t>>();
  return c;
}

} // namespace kiln::tune::detail
