// libFuzzer: a kernel cache entry as kiln reads it from disk. The input goes to parseEntry
// as it is. An input starting with 'E' is wrapped instead: its first line, when it is a
// JSON object, becomes the header of a well-formed entry (magic, length, checksums and
// payload fields filled in), the rest the payload, so mutations reach beneath the
// checksums: the header's fields and the launch metadata a backend decodes from "meta".
// Rules: no crash, no hang, no exception but kiln::Error or the JSON library's (both are
// caught where the cache reads an entry: the entry is then replaced), and a refused entry
// always says why.
#include <cstddef>
#include <cstdint>
#include <string>

#include "Runtime/GridPlan.h"
#include "Runtime/KernelCache.h"
#include "hopper/LaunchPlan.h"
#include "kiln/error.hpp"

using kiln::detail::parseEntry;
using kiln::detail::sha256Hex;
using nlohmann::json;

namespace {
std::string envelope(const std::string& in) {
  const size_t nl = in.find('\n');
  std::string header = in.substr(1, nl == std::string::npos ? std::string::npos : nl - 1);
  const std::string payload = nl == std::string::npos ? "" : in.substr(nl + 1);
  json h = json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (h.is_object()) {
    h["payload_bytes"] = payload.size();
    h["payload_sha256"] = sha256Hex(payload);
    header = h.dump();
  }
  return "KILNCACHE1 " + std::to_string(header.size()) + " " + sha256Hex(header) + "\n" + header + "\n" + payload;
}

// What the CUDA loader reads from an entry's meta before it touches a GPU.
void decodeMeta(const json& meta) {
  try {
    (void)meta.at("entry").get<std::string>();
    (void)meta.at("threads").get<int64_t>();
    kiln::detail::GridPlan grid = kiln::detail::GridPlan::fromJson(meta.at("grid"));
    (void)grid.str();
    (void)grid.evaluate({{"M", 4097}, {"N", 129}, {"K", 65}}, "fuzz");
    if (meta.contains("sm90")) {
      const json& twins = meta.at("sm90");
      if (twins.is_array())
        for (const json& plan : twins) (void)kiln::hopper::LaunchPlan::fromJson(plan).str();
      else
        (void)kiln::hopper::LaunchPlan::fromJson(twins).str();
    }
  } catch (const kiln::Error&) {
  } catch (const json::exception&) {
  }
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  const std::string bytes = !in.empty() && in[0] == 'E' ? envelope(in) : in;
  std::string problem;
  std::optional<kiln::detail::CacheRecord> r = parseEntry(bytes, &problem);
  if (!r) {
    if (problem.empty()) __builtin_trap(); // a refusal must say why
    return 0;
  }
  decodeMeta(r->header.at("meta"));
  return 0;
}
