#pragma once
// Internal: launching a kernel's sm_90a twin from its LaunchPlan (plain C++ over the
// driver table; no MLIR).
#include <cstdint>
#include <functional>
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

/// Whether launches split tiles along K (stream-K): when the cost model says it pays
/// (auto), never, or whenever the tiles do not fill the last round of CTAs (on; for A/B).
enum class StreamK { Auto, Off, On };

struct LaunchConfig {
  int smCount = 0; ///< the GPU's SMs; 0: one CTA per tile (no persistent grid, no stream-K)
  StreamK streamK = StreamK::Auto;
};

/// How one launch divides C's tiles: `ctas` CTAs, the last `streamKTiles` tiles split
/// along K (see Sm90Tiles.h), and the busiest CTA's work in tiles of the plan (`cost`).
struct Split {
  int64_t ctas = 0;
  int64_t streamKTiles = 0;
  int64_t streamKCtas = 0;
  double cost = 0;
};

/// The split of `args`' tiles for `plan`. Whole tiles: ceil(tiles / slots) rounds on
/// slots = smCount x ctasPerSm CTAs. Stream-K (a stream-K plan whose tiles leave the last
/// round part-empty): all but the last full round and the remainder go whole, those
/// tiles' k-steps evenly; cost tiles / slots + min(1, 6 / kTiles) (the fix-up of a split
/// tile, measured against its main loop). Stream-K where it costs under 0.97x whole tiles
/// (StreamK::Auto), always or never (On, Off).
Split split(const LaunchPlan& plan, const std::vector<TensorView>& args, const LaunchConfig& config);

/// Which of a kernel's twins (`twins`, each compiled for one tile width) runs `args`: the
/// one whose split (above) costs least, counting a 128 x 256 tile as 1.88 128 x 128 tiles
/// (it computes 6% faster per element on the H200); ties go to the narrower. -1 when none
/// applies (`why` says why not for the first). `work`, when given, gets the chosen twin's
/// split (what launch() takes, so a launch computes it once).
int choose(const std::vector<LaunchPlan>& twins, const std::vector<TensorView>& args, const LaunchConfig& config,
           std::string* why, Split* work = nullptr);

/// Device memory of at least `bytes` for this launch's stream: the stream-K workspace
/// (its first kStreamKCounterBytes zero before the first use).
using WorkspaceFn = std::function<CUdeviceptr(size_t bytes)>;

/// Encodes the tensor maps, packs the parameters and launches `f` on `stream` divided as
/// `work` (split()'s for these arguments) says; a stream-K launch takes its workspace from
/// `workspace`.
void launch(CUfunction f, const LaunchPlan& plan, const std::vector<TensorView>& args, CUstream stream,
            const std::string& kernelName, const Split& work, const WorkspaceFn& workspace);

} // namespace kiln::hopper
