#pragma once
// Internal: the CUDA backend's compiler, tile IR -> gpu/nvvm -> LLVM -> PTX, in-process.
// Needs no GPU and no driver. (PTX -> cubin is NvJitLink.h; loading is Driver.h.)
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "hopper/LaunchPlan.h"
#include "hopper/Sm90Tiles.h"
#include "kiln/kernel.hpp"
#include "kiln/runtime.hpp"
#include "Runtime/GridPlan.h"

namespace kiln::cuda {

struct DeviceCode {
  std::string name;         ///< the kernel's entry in the PTX
  std::string ptx;
  std::string arch;         ///< "sm_90a"
  int64_t shared_bytes = 0; ///< dynamic shared memory per CTA
  int64_t threads = 0;      ///< threads per CTA
  detail::GridPlan grid;
  CompileTimes times;       ///< tile passes, lowering, codegen (PTX)
  /// sm_90a: the TMA + wgmma twins of a GEMM-shaped kernel (one per tile width, narrowest
  /// first), in the same PTX module; the runtime launches the one hopper::choose picks when
  /// its preconditions hold (else the portable kernel above). Empty: no twin.
  std::vector<hopper::LaunchPlan> sm90;
  std::string sm90_why_not; ///< sm_90a, no twin: why the kernel did not qualify
  /// With CompileOptions::splitPortable and a twin: the portable kernel's PTX module, still
  /// being made on a thread that owns the MLIR module (`ptx` holds the twins' alone); its
  /// value is empty where LLVM failed. No future otherwise: `ptx` holds every entry.
  std::shared_future<std::optional<std::string>> portable_ptx;
  /// With CompileOptions::splitPortable: the PTX modules of the twins past `ptx`'s first, one
  /// each, in order, made on threads of their own (the runtime finds each entry where it is).
  std::vector<std::string> more_ptx;
};

/// What decides the code besides the kernel (all of it goes into the cache key).
struct CompileOptions {
  std::string arch;       ///< "sm_90a"
  int numWarps = 4;       ///< the portable kernel's warps per CTA
  bool hopperGemm = true; ///< sm_90a: a TMA + wgmma twin for GEMM-shaped kernels
  int hopperTileN = 0;    ///< its columns per tile (128, 192, 256; 0: kiln's, chosen per launch)
  int hopperTileM = 0;    ///< its rows per tile (64, 128; 0: both, chosen per launch)
  int hopperStages = 0;   ///< its shared-memory ring depth (0: the most that fit)
  int hopperCluster = 0;  ///< its CTAs per cluster (1: none; 2, 4: sharing A; 0: kiln's, hopper/Twins.h)
  bool hopperClusterM = false; ///< pairs sharing B (vertically adjacent tiles) instead
  int hopperRaster = 0;   ///< its tile order: groups of this many tile rows (0: 8)
  int hopperDecodeRows = hopper::kDecodeRows; ///< with kiln's tiles: the decode twin's rows (0: none)
  int hopperWideRows = hopper::kWideRows;     ///< with kiln's tiles: the wide swapped twins' rows (0: none)
  /// With a twin: the portable kernel in a PTX module of its own (DeviceCode::portable_ptx),
  /// made on a second thread while the caller goes on with the twins'. Not in the cache
  /// key: the code is the same.
  bool splitPortable = false;
  /// The most threads LLVM's code generation of the twins' modules uses (0: one per core;
  /// the portable kernel's, with splitPortable, has a thread of its own). Not in the key.
  int threads = 0;
};

/// Compiles `kernel` to PTX. When `stop` is Stage::mlir or Stage::llvm, returns that
/// stage's text in `*dump` and leaves the PTX empty. Throws kiln::Error(CompileFailed)
/// with the failing pass's diagnostics.
DeviceCode compileToPtx(const Kernel& kernel, const CompileOptions& options, Stage stop = Stage::ptx,
                        std::string* dump = nullptr);

/// "sm_80".."sm_120a": the archs kiln's CUDA backend targets; kiln::Error(Unsupported)
/// naming the supported set otherwise.
void checkArch(const std::string& arch);

} // namespace kiln::cuda
