#pragma once
// Internal: a kernel's PTX modules as one cache entry keeps them. On a GPU a kernel with
// sm_90a twins is several PTX modules (the first twin's, one per further twin, the portable
// fallback's); the entry's payload holds them one after another and its metadata names
// where each after the first starts. Reading a payload checks every start, so an entry
// whose metadata does not fit its payload is refused (then recompiled and replaced), never
// loaded in pieces that are not modules.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::cuda {

struct PtxModules {
  std::string first;                   ///< the first twin's module (or the only module)
  std::vector<std::string> twins;      ///< the further twins' modules: twin i + 1 in twins[i]
  std::optional<std::string> portable; ///< the portable fallback's module, when it has its own
};

/// The modules as one payload; writes where each starts into `meta`: "modules_at" (the
/// further twins', when there are any) and "portable_at" (the fallback's, when present).
std::string joinPtxModules(const PtxModules& modules, nlohmann::json& meta);

/// Splits a payload written by joinPtxModules by the starts in `meta`. Every start must be
/// an integer after the one before it and inside the payload, and only a PTX payload
/// (`isPtx`) may have any. Throws kiln::Error(InvalidArgument) naming `kernel`, the module
/// and the start otherwise.
PtxModules splitPtxModules(const std::string& payload, const nlohmann::json& meta, bool isPtx,
                           const std::string& kernel);

/// The twins' modules as one PTX module, for one driver JIT whose split compile (its
/// threads) spreads the entries over the cores: separate modules are JIT-compiled one at a
/// time whatever the threads, and a module of one entry gains nothing from the split.
/// `first` whole, then each further module's entries and declarations, less its header
/// (which must equal first's) and the module-scope declarations `first` already has
/// (`kiln_sm90_smem`). Nothing when a module holds what this join does not know to be
/// safe to merge (another header, a declaration of its own, a .func, text after the last
/// statement): the caller then loads the modules one by one.
std::optional<std::string> joinForJit(const std::string& first, const std::vector<std::string>& more);

} // namespace kiln::cuda
