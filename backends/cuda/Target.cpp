#include "Target.h"

#include "kiln/error.hpp"

namespace kiln::cuda {

const std::vector<CudaTarget>& cudaTargets() {
  // PTX versions: the first ISA with each target (PTX ISA's release notes); LLVM refuses,
  // by aborting the process, to emit a target under a PTX version that lacks it.
  static const std::vector<CudaTarget> targets = {
      {"sm_80", 80, 80, false, false, 163},   {"sm_86", 86, 80, false, false, 99},
      {"sm_87", 87, 80, false, false, 163},   {"sm_89", 89, 80, false, false, 99},
      {"sm_90", 90, 80, false, true, 227},    {"sm_90a", 90, 80, true, true, 227},
      {"sm_100", 100, 86, false, true, 227},  {"sm_100a", 100, 86, false, true, 227},
      {"sm_120", 120, 87, false, true, 99},   {"sm_120a", 120, 87, false, true, 99},
  };
  return targets;
}

const CudaTarget& cudaTarget(const std::string& arch) {
  std::string names;
  for (const CudaTarget& t : cudaTargets()) {
    if (arch == t.arch) return t;
    names += (names.empty() ? "" : ", ") + std::string(t.arch);
  }
  throw Error(ErrorKind::Unsupported, "unsupported CUDA architecture '" + arch + "': kiln's CUDA backend targets " +
                                          names + " (Ampere and newer)");
}

} // namespace kiln::cuda
