#pragma once
// Internal: launching a kernel's sm_90a twin from its LaunchPlan (plain C++ over the
// driver table; no MLIR).
#include <cstdint>
#include <array>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include <cuda.h>

#include "hopper/LaunchPlan.h"
#include "kiln/tensor.hpp"

namespace kiln::hopper {

/// Whether the twin can run on `args` (already checked against the kernel's signature):
/// A and B rows contiguous, 16-byte aligned base and row pitch (TMA's rules), C's rows
/// contiguous and pairs of elements 4-byte aligned, K >= 1, grid within CUDA's limits.
/// When not, `why` names the rule; the portable kernel then runs (the same math; the
/// twin's epilogue divisions and square roots are the 2-ulp approximate ones).
/// A plan naming arguments or dims `args` lacks is refused the same way.
bool applies(const LaunchPlan& plan, const std::vector<TensorView>& args, std::string* why);

/// Whether launches split tiles along K (split-K): never, where the cost model says it pays
/// (auto; LaunchConfig's default, for the tests of the model), or wherever the tiles leave
/// the last round of CTAs part-empty (on). The runtime's default is Off.
enum class SplitK { Auto, Off, On };

struct LaunchConfig {
  int smCount = 0; ///< the GPU's SMs; 0: one CTA per tile (no persistent grid, no split-K)
  SplitK splitK = SplitK::Auto;
  /// RuntimeOptions::hopper_split_k: 0 as `splitK` says; 1 never; 2..16 that many chunks
  /// (fewer where the tiles' k-steps or the workspace's slots do not allow them).
  int64_t splits = 0;
};

/// How one launch divides C's tiles: `ctas` CTAs; the last `splitTiles` tiles cut into
/// `splits` chunks along K (see Sm90Tiles.h); the busiest CTA's work in tiles (`cost`).
struct Split {
  int64_t ctas = 0;
  int64_t splitTiles = 0;
  int64_t splits = 0;
  double cost = 0;
  /// K-clusters (LaunchPlan::kClusters): CTAs per cluster, each tile cut along K into that
  /// many chunks, one per CTA of the cluster (splitTiles 0). 0: the plan's own cluster.
  int64_t cluster = 0;
  /// Attention: query heads per program (headFold()); 1: one.
  int64_t fold = 1;
};

/// An attention twin that folds heads (LaunchPlan::foldsHeadsOf): query heads per program
/// for `args` — the most f dividing max(H / max(G, 1), 1) whose f T rows fit one 64-row
/// tile (T: O's dim 2, the queries per head); 1 where none does, or for other plans. The f
/// heads share their K/V head, so a program reads it once for all of them.
int64_t headFold(const LaunchPlan& plan, const std::vector<TensorView>& args);

/// An attention twin's key splits (LaunchPlan::kClusters) for `args`: clusters of s CTAs
/// (Split::cluster; any s from 2 up to plan.kCluster), each cutting its programs' keys into s
/// parts, for the s that leaves the busiest SM the fewest key steps — ceil(CTAs / clusters
/// that fit at once) x ceil(steps / s) (Split::cost), against ceil(CTAs / SMs) x steps
/// unsplit: it pays where the grid alone would leave SMs idle (decode) — with parts of
/// kKeySplitMinSteps steps at least, and (config.splits 0) only at kKeySplitMinGain of the
/// unsplit steps or fewer; config.splits = 1 never splits, s > 1 at most s parts.
/// Else one CTA per group of query tiles (cluster 0).
Split keySplit(const LaunchPlan& plan, const std::vector<TensorView>& args, const LaunchConfig& config);
/// A launch of `plan` cut as `work` says, for launch_path: "132 CTAs, split-K: the last 96
/// tiles cut along K into 4 chunks", "96 CTAs, key splits in clusters of 3: ...".
std::string describe(const LaunchPlan& plan, const Split& work);
/// A part of an attention program's keys has this many key steps at least (fewer would
/// cost more in pipeline fill and the merge than they spread).
inline constexpr int64_t kKeySplitMinSteps = 4;
/// Left to itself (no number of parts asked for), keySplit cuts keys only where the model's
/// busiest SM takes at most this share of its key steps unsplit.
inline constexpr double kKeySplitMinGain = 0.75;

/// The split of `args`' tiles for `plan`. Whole tiles: ceil(tiles / slots) rounds on
/// slots = smCount x ctasPerSm CTAs. Split-K (a split-K plan whose tiles leave the last
/// round part-empty): the whole rounds but the last full one, then the rest cut into s
/// chunks (2..16, each at least kSplitKMinSteps k-steps, at most 4 chunks per CTA in all:
/// a workspace slot each), s chosen for the least cost:
/// ceil(tiles x s / slots) / s rounds plus s x 1.5 / kTiles for the fix-up. Split where
/// that costs under 0.97x whole tiles (SplitK::Auto), wherever a split is possible (On),
/// or never (Off); config.splits overrides the mode (1: never; 2..16: that many chunks,
/// within the same limits).
/// A K-cluster plan (the decode twin) instead splits only where its tiles fill less than
/// half the slots: in clusters of the smallest s = 2, 4 (to kCluster) whose CTAs fill half (each
/// chunk at least kSplitKMinSteps k-steps, all the clusters at once: plan.clusterSlots);
/// cost ceil(tiles / clusters) / s. config.splits takes the largest s up to it (1: none).
Split split(const LaunchPlan& plan, const std::vector<TensorView>& args, const LaunchConfig& config);

/// Which of a kernel's twins (`twins`, each compiled for one tile) runs `args`: the first
/// decode twin (LaunchPlan::swapAB; the compiler orders them smallest first) whose tileM holds
/// C's rows, where one does; else, with an SM count, the first whose two rows of tiles hold
/// them where those tiles fit in one round of CTAs; else the one whose split (above) costs
/// least, counting a 128 x 256 tile as 1.88 128 x 128 tiles (it computes 6% faster per
/// element on the H200), a 128 x 192 one as 1.47 (2% faster) and a 64-row one as 0.68 per 64 x 128,
/// a stacked pair of them as one unit; beside 128-row twins, a 64-row tile only where C
/// has no more rows of its units than of 128-row tiles (alone: C with at most 64 rows);
/// stacked pairs only where C has two rows of their tiles. At equal cost a tile in stacked
/// pairs beats the same tile alone; other ties go to the one first in `twins` (the
/// compiler orders them 128 x 128 alone and stacked, 128 x 256, then the 64-row ones,
/// alone before stacked). -1 when none
/// applies (`why` says why not for the first). `work`, when given, gets the chosen twin's
/// split (what launch() takes, so a launch computes it once).
int choose(const std::vector<LaunchPlan>& twins, const std::vector<TensorView>& args, const LaunchConfig& config,
           std::string* why, Split* work = nullptr);

/// choose() for a kernel's launches, remembering its last few answers: choose() weighs every
/// twin (about 0.5 µs for a GEMM's 13 on a 2-core build host), and an engine launches the
/// same shapes again and again. An answer is reused only for arguments equal in everything
/// choose() reads: each one's dtype, dims, strides as given, and address modulo 32 (TMA's
/// rules ask 16-byte alignment, the tall pairs' rule whether B starts on a 32-byte sector
/// of L2); the twins and the config must stay as they were at the first call (a kernel's
/// are fixed once loaded). Safe to call from several threads.
class ChoiceCache {
public:
  int choose(const std::vector<LaunchPlan>& twins, const std::vector<TensorView>& args, const LaunchConfig& config,
             std::string* why, Split* work);

private:
  // 4 + 2 x rank words an argument: eight 4-D strided views fit (attention over strided Q, K,
  // V and O takes 48); a longer key is not kept, and that launch chooses afresh.
  static constexpr size_t kKeyWords = 96;
  static constexpr size_t kEntries = 8;   // shapes kept, the oldest replaced
  struct Entry {
    size_t words = 0; // 0: empty
    std::array<int64_t, kKeyWords> key{};
    int twin = -1;
    Split work;
    std::string why;
  };
  std::mutex mu_;
  std::array<Entry, kEntries> entries_;
  size_t next_ = 0;
};

/// The tensor maps a kernel's launches encoded, for its next launches over the same views:
/// a map is a function of its inputs alone (the view's address, type, extents and pitches,
/// and the box; the rest is fixed), so one kept for equal inputs is the map the driver would
/// encode again (cuTensorMapEncodeTiled, per map and launch otherwise). Safe to call from
/// several threads.
class TensorMapCache {
public:
  static constexpr size_t kKeyWords = 20; // address, type, rank, 5 extents, 4 pitches, 5 box sides, 3 spare
  using Key = std::array<uint64_t, kKeyWords>;
  /// The key of the map cuTensorMapEncodeTiled makes from these (what varies between a
  /// kernel's launches; the swizzle, interleave, promotion and fill are the plan's, fixed):
  /// `rank` dims and box sides, rank - 1 pitches, innermost first as the driver takes them.
  static Key keyOf(const void* address, uint32_t type, size_t rank, const uint64_t* dims, const uint64_t* pitches,
                   const uint32_t* box);
  /// Copies the map kept for `key` into `map` (sizeof(CUtensorMap) bytes); false if none.
  bool find(const Key& key, void* map);
  void keep(const Key& key, const void* map);

private:
  static constexpr size_t kEntries = 16; // a GEMM's three maps for five shapes
  struct Entry {
    uint64_t lastUse = 0; // 0: empty; the least recently used goes first
    Key key{};
    CUtensorMap map;
  };
  std::mutex mu_;
  std::array<Entry, kEntries> entries_;
  uint64_t clock_ = 0;
};

/// Device memory of at least `bytes` for this launch's stream: the split-K workspace
/// (its first kSplitKCounterBytes zero before the first use).
using WorkspaceFn = std::function<CUdeviceptr(size_t bytes)>;

/// Encodes the tensor maps (or finds them in `maps`, where given), packs the parameters and
/// launches `f` on `stream` divided as `work` (split()'s for these arguments) says; a
/// split-K launch takes its workspace from `workspace`.
void launch(CUfunction f, const LaunchPlan& plan, const std::vector<TensorView>& args, CUstream stream,
            const std::string& kernelName, const Split& work, const WorkspaceFn& workspace,
            TensorMapCache* maps = nullptr);

} // namespace kiln::hopper
