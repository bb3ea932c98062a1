#pragma once
// Internal: the CUDA toolkit's ptxas, run as a program of its own, to make the machine code of
// a kernel with sm_90a twins ahead of time (compiling for deploy, without a GPU). nvJitLink
// compiles PTX as relocatable code, which drops the twins' setmaxnreg; ptxas compiles a whole
// program, as the CUDA driver's JIT does on a GPU, so a deploy entry can hold machine code
// that a GPU runtime loads in milliseconds instead of JIT-compiling the PTX for a second.
#include <optional>
#include <string>

#include "NvJitLink.h" // CubinResult

namespace kiln::cuda {

struct PtxasTool {
  std::string path;
  std::string release; ///< "13.0", from `ptxas --version`
};

/// The ptxas that `setting` names (KILN_PTXAS's value; empty when unset), of `release`
/// ("13.0": nvJitLink's, whose version the cache key names): "off" none; a path that one;
/// unset, the toolkit's kiln was built with, else the first `ptxas` on PATH, of that
/// release. nullopt, with `why`, when none is (unset) or it is off. Throws
/// kiln::Error(InvalidArgument) when `setting` names a program that does not run as ptxas
/// or is of another release: an explicit choice is never silently dropped.
std::optional<PtxasTool> findPtxas(const std::string& setting, const std::string& release, std::string* why);

/// `ptx` compiled by `tool` as a whole program for `arch` (-O3 -v; -split-compile over
/// `threads` when not 1, 0: every core), with ptxas's report of `kernelName` parsed.
/// Throws kiln::Error(CompileFailed) with ptxas's output when it fails, and
/// kiln::Error(Runtime) when it cannot be run (no temporary directory, no process).
CubinResult ptxasCompile(const PtxasTool& tool, const std::string& ptx, const std::string& arch,
                         const std::string& kernelName, int threads);

} // namespace kiln::cuda
