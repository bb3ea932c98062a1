#include "PtxModules.h"

#include "Runtime/JsonInt.h"
#include "kiln/error.hpp"

namespace kiln::cuda {

std::string joinPtxModules(const PtxModules& modules, nlohmann::json& meta) {
  std::string payload = modules.first;
  if (!modules.twins.empty()) {
    nlohmann::json at = nlohmann::json::array();
    for (const std::string& ptx : modules.twins) {
      at.push_back(payload.size());
      payload += ptx;
    }
    meta["modules_at"] = at;
  }
  if (modules.portable) {
    meta["portable_at"] = payload.size();
    payload += *modules.portable;
  }
  return payload;
}

PtxModules splitPtxModules(const std::string& payload, const nlohmann::json& meta, bool isPtx,
                           const std::string& kernel) {
  // An empty module is no module: each start is past the one before and before the end.
  std::vector<size_t> starts = {0};
  auto startAt = [&](const nlohmann::json& j, const std::string& what) {
    if (!detail::isJsonInt<int64_t>(j))
      throw Error(ErrorKind::InvalidArgument,
                  "cache entry of kernel '" + kernel + "': the start of its " + what + " is not an integer");
    const int64_t at = j.get<int64_t>();
    if (!isPtx || at <= int64_t(starts.back()) || uint64_t(at) >= payload.size())
      throw Error(ErrorKind::InvalidArgument, "cache entry of kernel '" + kernel + "': its " + what +
                                                  " starts at byte " + std::to_string(at) + " of a " +
                                                  std::to_string(payload.size()) + "-byte " +
                                                  (isPtx ? "PTX" : "cubin") + " payload" +
                                                  (isPtx ? "" : " (a cubin is one module)"));
    starts.push_back(size_t(at));
  };
  if (meta.contains("modules_at")) {
    const nlohmann::json& at = meta.at("modules_at");
    if (!at.is_array())
      throw Error(ErrorKind::InvalidArgument, "cache entry of kernel '" + kernel + "': modules_at is not a list");
    for (size_t i = 0; i < at.size(); ++i) startAt(at[i], "twin module " + std::to_string(i + 2));
  }
  const size_t twinModules = starts.size();
  if (meta.contains("portable_at")) startAt(meta.at("portable_at"), "portable kernel's module");
  starts.push_back(payload.size());
  auto part = [&](size_t i) { return payload.substr(starts[i], starts[i + 1] - starts[i]); };
  PtxModules out;
  out.first = part(0);
  for (size_t i = 1; i < twinModules; ++i) out.twins.push_back(part(i));
  if (meta.contains("portable_at")) out.portable = part(twinModules);
  return out;
}

} // namespace kiln::cuda
