#pragma once
// Internal: launching a kernel's sm_90a twin from its LaunchPlan (plain C++ over the
// driver table; no MLIR).
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

/// Which of a kernel's twins (`twins`, each compiled for one tile width) runs `args` on a
/// GPU of `smCount` SMs: the one whose busiest SM has the least work, counting a 128 x 256
/// tile as 1.88 128 x 128 tiles (it computes 6% faster per element on the H200); ties go to
/// the narrower. -1 when none applies (`why` says why not for the first).
int choose(const std::vector<LaunchPlan>& twins, const std::vector<TensorView>& args, int smCount, std::string* why);

/// Encodes the tensor maps, packs the parameters and launches `f` on `stream`; a
/// persistent kernel gets min(tiles, smCount x plan.ctasPerSm) CTAs (smCount 0: one per tile).
void launch(CUfunction f, const LaunchPlan& plan, const std::vector<TensorView>& args, CUstream stream,
            const std::string& kernelName, int smCount);

} // namespace kiln::hopper
