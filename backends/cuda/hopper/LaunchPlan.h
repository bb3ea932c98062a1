#pragma once
// Internal: how to launch a kernel whose parameters are not one memref per tensor — the
// compiler writes it, the kernel cache stores it, the runtime interprets it. Plain C++
// (no MLIR, no CUDA): the IR carries it as a JSON string attribute, `kiln.launch_plan`,
// so `kiln compile --emit=mlir` shows it and lit checks it.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::hopper {

/// The attribute on a gpu.func that holds its plan.
inline constexpr const char* kLaunchPlanAttr = "kiln.launch_plan";

/// One kernel parameter, made at launch from the kernel's TensorView arguments.
struct LaunchParam {
  enum Kind {
    TensorMap, ///< a CUtensorMap of argument `arg` (row-major, its rank: 2 to 5) with box extents
               ///< `box`, innermost first (box[0] along the last dim), 128B swizzle, zero fill;
               ///< passed by value (__grid_constant__, 128 bytes)
    Pointer,   ///< argument `arg`'s device address
    Stride,    ///< argument `arg`'s stride along `dim`, in elements (i64)
    Dim,       ///< argument `arg`'s extent along `dim` (i32)
    Workspace,  ///< the runtime's split-K workspace for this launch (a device address; null
                ///< when the launch splits no tile). Layout: see Sm90Tiles.h
    SplitTiles, ///< how many of C's tiles (the last in the kernel's order) the launch cuts
                ///< along K (i32; 0: every CTA takes whole tiles)
    KSplits,    ///< into how many chunks of k-steps each split tile is cut (i32)
    HeadFold,   ///< attention: query heads per program, f (i32; 1: one head each). `arg`: K,
                ///< whose dim 1 is G; f divides max(H / max(G, 1), 1) (AttentionMatch::foldHeads),
                ///< and with f > 1 Q's map (parameter 0) reads boxes of T rows of f heads
  } kind = Pointer;
  int arg = 0;
  int dim = 0;
  std::vector<int64_t> box; ///< TensorMap only
};

inline constexpr const char* kParamKinds[] = {"tensormap", "pointer", "stride", "dim", "workspace", "split_tiles",
                                              "k_splits", "head_fold"};
inline constexpr int kParamKindCount = 8;

/// The kernel's work items (tiles of C) are the product over gridDims of
/// ceildiv(extent of argument `arg` along `dim` less `less`, tile) (none where that is not
/// positive).
struct GridDim {
  int arg = 0, dim = 0;
  int64_t tile = 1;
  std::string name; ///< the dim's symbol ("M") or constant, for messages
  /// Taken from the extent first: a grid over sequences counts B + 1 offsets less 1.
  int64_t less = 0;
  int64_t tiles(int64_t extent) const { return extent > less ? (extent - less + tile - 1) / tile : 0; }
};

struct LaunchPlan {
  /// What the twin computes: a GEMM tile of C (WgmmaGemm.cpp) or two query tiles of
  /// attention (AttentionSm90.cpp): the runtime chooses among GEMM twins by cost, and checks
  /// each kind's own launch rules.
  enum Kind { Gemm, Attention } kind = Gemm;
  std::string entry; ///< the kernel's name in the module
  int64_t threads = 0;
  int64_t sharedBytes = 0; ///< dynamic shared memory per CTA
  int64_t tileM = 0, tileN = 0, tileK = 0;
  int64_t stages = 0; ///< shared-memory ring depth (for reports; 0: not recorded)
  std::vector<GridDim> gridDims; ///< what the tiles are counted over (see GridDim)
  /// The kernel loops over tiles (CTA b takes b, b + grid, ...): the runtime launches
  /// min(tiles, SMs x ctasPerSm) CTAs on grid.x. Else one CTA per tile on grid.x.
  bool persistent = false;
  /// Attention over packed sequences (gridDims: query groups along the tokens, heads,
  /// sequences): the CTAs are (ceildiv(T, tile) + sequences) x heads, each finding its
  /// sequence and query group among the groups that hold rows of one (as many as there are
  /// when the sequences do not overlap); a CTA takes one more round of the grid for each
  /// time the groups outnumber it (overlapping windows).
  bool sequenceUnits = false;
  int64_t ctasPerSm = 1;
  std::vector<LaunchParam> params;
  int output = -1; ///< the argument the kernel writes (C)
  /// CTAs per cluster along grid.x (launched with cuLaunchKernelEx when above 1). A cluster
  /// takes `cluster` horizontally adjacent tiles at once (sharing A's tile), or vertically
  /// adjacent ones (sharing B's) when clusterAlongM.
  int64_t cluster = 1;
  bool clusterAlongM = false;
  /// A persistent kernel's tile order: groups of this many tile rows, column by column
  /// inside a group (0: not recorded, plans from before it was).
  int64_t raster = 0;
  /// The decode twin: C's tiles computed transposed (C^T = B^T A^T); the runtime takes it
  /// wherever C has at most tileM rows, and cuts its tiles along K by its cost model.
  bool swapAB = false;
  /// Products per tile (GEMM twins): 2 where one wgmma of twice tileN computes two sharing A
  /// (hopper::Config::dual); the cost model weighs a tile's work and wgmma width by it.
  int64_t products = 1;
  /// Split-K kernels (a Workspace, a SplitTiles and a KSplits parameter): the reduction extent K,
  /// counted in tileK steps; arg -1 when the kernel takes whole tiles only.
  GridDim reduction{-1, 0, 1, ""};
  /// The decode twin: it may run in clusters of up to this many CTAs that cut each tile
  /// along `reduction` and sum through distributed shared memory (Sm90Tiles.h, K-clusters);
  /// the runtime picks the size per launch. 1: whole tiles, or the workspace's split-K.
  int64_t kCluster = 1;
  /// Not in the JSON: filled by the runtime when it loads the twin, from the driver (every s
  /// up to kCluster for K-clusters; its own `cluster` for a twin in clusters). Index s: how
  /// many clusters of s CTAs fit on the GPU at once (0 or absent: unknown, taken as
  /// SMs x ctasPerSm / s). Clusters live inside one GPC, so s = 4 may leave SMs over.
  std::vector<int64_t> clusterSlots;
  /// Attention: why its keys are never split across a cluster (the loop is not an online
  /// softmax the twin recognises, or its state does not fit in the ring); empty where they
  /// may be, and for GEMMs. In the JSON only when set.
  std::string noKeySplits;
  /// Attention: why a consumer's softmax of a key step does not overlap its own product of
  /// the step before (FA3's intra-warpgroup overlap); empty where it does, and for GEMMs.
  /// Informative (the code is in the cubin); in the JSON only when set.
  std::string noOverlap;

  /// A decode twin (swapped, 64 columns, K-clusters), not a swapped twin of 128 columns:
  /// each kind has its own launch rule (Sm90Launch.cpp, chooseDecode and chooseWide).
  bool decode() const { return swapAB && tileN <= 64; }
  /// Split-K through the runtime's workspace (parameters Workspace, SplitTiles, KSplits).
  bool splitK() const { return reduction.arg >= 0 && kCluster == 1; }
  /// Split-K inside clusters (no parameters: the launch's cluster size says).
  bool kClusters() const { return reduction.arg >= 0 && kCluster > 1; }
  /// Attention whose query heads may share a program (a HeadFold parameter): K's argument,
  /// else -1.
  int foldsHeadsOf() const {
    for (const LaunchParam& p : params)
      if (p.kind == LaunchParam::HeadFold) return p.arg;
    return -1;
  }

  /// Attention that also stores one value per query row (a pointer parameter besides O's):
  /// that argument, else -1.
  int rowValuesOf() const {
    if (kind != Attention) return -1;
    for (const LaunchParam& p : params)
      if (p.kind == LaunchParam::Pointer && p.arg != output) return p.arg;
    return -1;
  }

  nlohmann::json toJson() const;  // inline below: the compiler (built without RTTI) writes plans too
  /// Throws kiln::Error(InvalidArgument) on a malformed plan (a corrupt cache entry).
  static LaunchPlan fromJson(const nlohmann::json& j);
  std::string str() const; ///< "128x256x64 tiles, 384 threads, 197632 B smem, grid (ceildiv(A.0, 128), ...)"
};

inline nlohmann::json LaunchPlan::toJson() const {
  nlohmann::json p = nlohmann::json::array(), g = nlohmann::json::array();
  for (const LaunchParam& x : params) {
    nlohmann::json j = {{"kind", kParamKinds[x.kind]}, {"arg", x.arg}, {"dim", x.dim}};
    if (x.kind == LaunchParam::TensorMap) j["box"] = x.box;
    p.push_back(j);
  }
  for (const GridDim& d : gridDims) {
    g.push_back({{"arg", d.arg}, {"dim", d.dim}, {"tile", d.tile}, {"name", d.name}});
    if (d.less) g.back()["less"] = d.less;
  }
  nlohmann::json j = {{"kind", kind == Attention ? "attention" : "gemm"}, {"entry", entry}, {"threads", threads}, {"shared_bytes", sharedBytes}, {"tile", {tileM, tileN, tileK}},
          {"stages", stages},
          {"grid", g}, {"persistent", persistent}, {"ctas_per_sm", ctasPerSm}, {"params", p}, {"output", output}, {"cluster", cluster}, {"cluster_m", clusterAlongM}, {"raster", raster}, {"swap_ab", swapAB}, {"k_cluster", kCluster}, {"products", products},
          {"reduction", {{"arg", reduction.arg}, {"dim", reduction.dim}, {"tile", reduction.tile}, {"name", reduction.name}}}};
  if (!noKeySplits.empty()) j["no_key_splits"] = noKeySplits;
  if (sequenceUnits) j["sequence_units"] = true;
  if (!noOverlap.empty()) j["no_overlap"] = noOverlap;
  return j;
}

} // namespace kiln::hopper
