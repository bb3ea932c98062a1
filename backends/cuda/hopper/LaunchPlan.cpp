#include "hopper/LaunchPlan.h"

#include <algorithm>

#include "Runtime/JsonInt.h"
#include "Runtime/Throw.h"
#include "kiln/error.hpp"

namespace kiln::hopper {

LaunchPlan LaunchPlan::fromJson(const nlohmann::json& j) {
  LaunchPlan plan;
  try {
    const std::string kind = j.value("kind", std::string("gemm")); // plans from before attention: GEMMs
    if (kind != "gemm" && kind != "attention") throw std::out_of_range("unknown kind '" + kind + "'");
    plan.kind = kind == "attention" ? Attention : Gemm;
    plan.entry = j.at("entry").get<std::string>();
    plan.threads = detail::jsonInt<int64_t>(j.at("threads"));
    plan.sharedBytes = detail::jsonInt<int64_t>(j.at("shared_bytes"));
    auto tile = detail::jsonInts<int64_t>(j.at("tile"));
    if (tile.size() != 3) throw std::out_of_range("tile needs 3 sizes");
    plan.tileM = tile[0], plan.tileN = tile[1], plan.tileK = tile[2];
    plan.stages = detail::jsonIntOr<int64_t>(j, "stages", 0);
    if (plan.stages < 0 || plan.stages > 64) throw std::out_of_range("bad stages");
    plan.persistent = j.at("persistent").get<bool>();
    plan.sequenceUnits = j.value("sequence_units", false);
    plan.cluster = detail::jsonIntOr<int64_t>(j, "cluster", 1);
    plan.clusterAlongM = j.value("cluster_m", false);
    plan.raster = detail::jsonIntOr<int64_t>(j, "raster", 0);
    plan.swapAB = j.value("swap_ab", false);
    plan.products = detail::jsonIntOr<int64_t>(j, "products", 1);
    if (plan.products < 1 || plan.products > 2) throw std::out_of_range("bad products (1 or 2)");
    if (plan.raster < 0 || plan.raster > 64) throw std::out_of_range("bad raster group");
    if (plan.cluster < 1 || plan.cluster > 8) throw std::out_of_range("bad cluster size");
    plan.kCluster = detail::jsonIntOr<int64_t>(j, "k_cluster", 1);
    if (plan.kCluster < 1 || plan.kCluster > 8 ||
        (plan.kCluster > 1 && (plan.cluster != 1 || (!plan.swapAB && plan.kind != Attention))))
      throw std::out_of_range("bad k_cluster (1..8, only for a decode twin or attention without a cluster of its own)");
    plan.ctasPerSm = detail::jsonInt<int64_t>(j.at("ctas_per_sm"));
    if (plan.ctasPerSm < 1 || plan.ctasPerSm > 32) throw std::out_of_range("bad ctas_per_sm");
    for (const auto& g : j.at("grid")) {
      GridDim d{detail::jsonInt<int>(g.at("arg")), detail::jsonInt<int>(g.at("dim")), detail::jsonInt<int64_t>(g.at("tile")),
                g.value("name", std::string()), detail::jsonIntOr<int64_t>(g, "less", 0)};
      if (d.tile < 1 || d.arg < 0 || d.dim < 0 || d.less < 0) throw std::out_of_range("bad grid dim");
      plan.gridDims.push_back(d);
    }
    for (const auto& x : j.at("params")) {
      LaunchParam p;
      std::string kind = x.at("kind").get<std::string>();
      int k = 0;
      while (k < kParamKindCount && kind != kParamKinds[k]) ++k;
      if (k == kParamKindCount) throw std::out_of_range("unknown parameter kind '" + kind + "'");
      p.kind = LaunchParam::Kind(k);
      p.arg = detail::jsonInt<int>(x.at("arg"));
      p.dim = detail::jsonInt<int>(x.at("dim"));
      if (p.arg < 0 || p.dim < 0) throw std::out_of_range("negative argument or dim");
      if (p.kind == LaunchParam::TensorMap) {
        p.box = detail::jsonInts<int64_t>(x.at("box"));
        if (p.box.size() < 2 || p.box.size() > 5 ||
            std::any_of(p.box.begin(), p.box.end(), [](int64_t e) { return e < 1 || e > 256; }))
          throw std::out_of_range("a tensor map box is 2 to 5 extents of 1..256");
      }
      plan.params.push_back(p);
    }
    // Plans from before split-K have no reduction: whole tiles only.
    if (j.contains("reduction")) {
      const auto& r = j.at("reduction");
      plan.reduction = {detail::jsonInt<int>(r.at("arg")), detail::jsonInt<int>(r.at("dim")), detail::jsonInt<int64_t>(r.at("tile")),
                        r.value("name", std::string())};
      if (plan.reduction.arg >= 0 && (plan.reduction.dim < 0 || plan.reduction.tile < 1))
        throw std::out_of_range("bad reduction dim");
    }
    if (plan.kCluster > 1 && plan.reduction.arg < 0) throw std::out_of_range("k_cluster without a reduction dim");
    if (j.contains("no_key_splits")) plan.noKeySplits = j.at("no_key_splits").get<std::string>();
    if (j.contains("no_overlap")) plan.noOverlap = j.at("no_overlap").get<std::string>();
    int splitKParams = 0;
    for (const LaunchParam& p : plan.params)
      splitKParams += p.kind == LaunchParam::Workspace || p.kind == LaunchParam::SplitTiles ||
                      p.kind == LaunchParam::KSplits;
    if (splitKParams != (plan.splitK() ? 3 : 0))
      throw std::out_of_range("a split-K plan has one workspace, one split_tiles and one k_splits parameter, others none");
    // Plans from before "output" was recorded passed C as their first pointer.
    plan.output = detail::jsonIntOr<int>(j, "output", -1);
    for (size_t i = 0; plan.output < 0 && i < plan.params.size(); ++i)
      if (plan.params[i].kind == LaunchParam::Pointer) plan.output = plan.params[i].arg;
    if (plan.output < 0) throw std::out_of_range("no output argument");
    if (plan.entry.empty() || plan.threads < 1 || plan.threads > 1024 || plan.sharedBytes < 0 ||
        plan.gridDims.empty() || plan.gridDims.size() > 3)
      throw std::out_of_range("bad entry, threads, shared memory or grid");
  } catch (const std::exception& e) {
    detail::throwError(ErrorKind::InvalidArgument, std::string("malformed launch plan: ") + e.what());
  }
  return plan;
}

std::string LaunchPlan::str() const {
  if (kind == Attention)
    return "attention: " + std::to_string(tileM) + " query rows (" + std::to_string(tileM / 64) + " programs) x " +
           std::to_string(tileN) +
           " keys a step, head dim " + std::to_string(tileK) + ", " + std::to_string(stages) + " stages, " +
           std::to_string(threads) + " threads, " + std::to_string(sharedBytes) + " B smem, one CTA per ceildiv(" +
           (gridDims.empty() ? std::string("S") : gridDims[0].name) + ", " + std::to_string(tileM) + ") x heads x " +
           (sequenceUnits ? std::string("sequences, only where a sequence has rows (found from its window at run time)")
            : gridDims.size() == 3 && gridDims[2].less
                ? gridDims[2].name + " - " + std::to_string(gridDims[2].less) + " sequences (a CTA past its own leaves at once)"
                : std::string("batches")) +
           (kClusters()             ? " (keys split in clusters of up to " + std::to_string(kCluster) + " where that leaves no SM idle)"
            : noKeySplits.empty() ? ""
                                  : " (keys never split: " + noKeySplits + ")") +
           (noOverlap.empty() ? "; each step's softmax overlaps the product before it"
                              : "; each step's softmax after its products (" + noOverlap + ")") +
           (foldsHeadsOf() >= 0 ? "; query heads sharing a K/V head folded into one program where few rows each" : "") +
           (rowValuesOf() >= 0 ? "; one f32 value per query row stored to argument " + std::to_string(rowValuesOf()) : "");
  std::string s = std::to_string(tileM) + "x" + std::to_string(tileN) + "x" + std::to_string(tileK) + " tiles, " +
                  (stages ? std::to_string(stages) + " stages, " : std::string()) +
                  (cluster > 1 ? "clusters of " + std::to_string(cluster) + (clusterAlongM ? " (B multicast), " : " (A multicast), ")
                               : std::string()) +
                  std::to_string(threads) + " threads, " + std::to_string(sharedBytes) + " B smem, " + (persistent ? "persistent over " : "one CTA per ");
  for (size_t i = 0; i < gridDims.size(); ++i)
    s += (i ? " x " : "") + std::string("ceildiv(") +
         (gridDims[i].name.empty() ? "arg" + std::to_string(gridDims[i].arg) + "." + std::to_string(gridDims[i].dim)
                                   : gridDims[i].name) +
         ", " + std::to_string(gridDims[i].tile) + ")";
  return s + " tiles" + (persistent && raster && raster != 8 ? " in groups of " + std::to_string(raster) + " tile rows" : "") +
         (products > 1 ? " (" + std::to_string(products) + " products sharing A, one wgmma)" : "") +
         (splitK() ? " (split-K capable)" : "") +
         (kClusters() ? " (split along K in clusters of up to " + std::to_string(kCluster) + ")" : "");
}

} // namespace kiln::hopper
