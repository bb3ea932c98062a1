// libFuzzer: a tuning database as kiln reads it (a file a user may have edited). Either
// parseDatabase refuses it with a kiln::Error, or everything the tuner later reads from
// it reads without throwing. Any other exception, a crash or a hang is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "Tune/Database.h"
#include "kiln/error.hpp"

using nlohmann::json;
namespace td = kiln::tune::detail;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  json db;
  try {
    db = td::parseDatabase(text, "fuzz.json");
  } catch (const kiln::Error&) {
    return 0;
  }
  for (const json& e : db.at("entries")) { // as replay reads a matching entry
    const json& fp = e.at("fingerprint");
    (void)e.at("signature").get<std::string>();
    (void)e.at("shape_class").get<std::string>();
    (void)fp.value("backend", ""), (void)fp.value("device", "?");
    (void)td::fingerprintFrom(fp);
    (void)td::configFrom(e.at("chosen").at("config"));
  }
  return 0;
}
