#pragma once
// Internal: what differs per NVIDIA target, in one table (after Triton's TargetInfo): the
// PTX version LLVM must emit for it and which instructions kiln may use. Plain C++.
#include <string>
#include <vector>

namespace kiln::cuda {

struct CudaTarget {
  const char* arch;   ///< "sm_90a"
  int sm;             ///< 90
  int ptxVersion;     ///< the lowest PTX ISA version with this target, x10: 80 = PTX 8.0
  /// wgmma.mma_async, setmaxnreg: sm_90a only (the 'a' features are not forward-compatible;
  /// Blackwell's tensor-core path is tcgen05, not wgmma).
  bool wgmma;
  bool tma;           ///< cp.async.bulk.tensor and mbarrier tx counts: sm_90 and newer
  /// The most shared memory one CTA may opt into, in KiB (CUDA's "maximum shared memory per
  /// block, opt-in"): a kernel needing more cannot launch on any GPU of this target.
  int sharedKiBPerCta;

  /// The NVPTX feature string that sets the PTX version ("+ptx80").
  std::string ptxFeatures() const { return "+ptx" + std::to_string(ptxVersion); }
};

/// The target `arch` names; kiln::Error(Unsupported) naming the supported ones otherwise.
const CudaTarget& cudaTarget(const std::string& arch);

/// Every target kiln's CUDA backend compiles for, oldest first.
const std::vector<CudaTarget>& cudaTargets();

} // namespace kiln::cuda
