#pragma once
// Internal: PTX -> cubin in-process with nvJitLink, loaded with dlopen (never linked), so
// kiln builds and runs where the CUDA toolkit is absent and says so clearly. Works with no
// GPU and no driver: CI compiles every kernel to machine code and reads ptxas's
// register/spill/shared-memory report from here.
#include <string>
#include <vector>

namespace kiln::cuda {

struct CubinResult {
  std::vector<char> cubin;  ///< an ELF image ("\x7f" "ELF")
  std::string info_log;     ///< nvJitLink's info log (ptxas -v output), verbatim
  // Parsed from info_log for the requested kernel; -1 when the log does not say.
  int registers = -1;       ///< "Used N registers"
  int spill_stores = -1;    ///< "N bytes spill stores" (bytes)
  int spill_loads = -1;     ///< "M bytes spill loads" (bytes)
  int shared_bytes = -1;    ///< static shared memory, "X bytes smem" (0 when ptxas omits it)
  int stack_bytes = -1;     ///< "N bytes stack frame"
  int barriers = -1;        ///< "used M barriers"
  std::string compiler;     ///< "nvJitLink 13.0"
  std::string arch;         ///< the -arch it was compiled for, e.g. "sm_90a"
  /// Spill stores + loads in bytes (KernelReport::spill_bytes); -1 when the log does not say.
  int spillBytes() const { return spill_stores < 0 ? -1 : spill_stores + (spill_loads > 0 ? spill_loads : 0); }
};

/// True when libnvJitLink can be loaded and has every entry point kiln uses; otherwise
/// false and, when `why` is given, the reason.
bool nvJitLinkAvailable(std::string* why = nullptr);

/// "nvJitLink 13.0" (nvJitLinkVersion); kiln::Error(Unsupported) when the library is absent.
std::string nvJitLinkVersionString();

/// Compiles PTX text for `arch` ("sm_90a", "sm_80", ...) with
/// "-arch=<arch> -O3 -verbose -no-cache" plus `extraOptions` (e.g. "-maxrregcount=64",
/// "-lineinfo"), and parses the resource report of entry `kernelName` (empty: parse
/// nothing). -no-cache because with a driver installed nvJitLink otherwise reuses its disk
/// cache (~/.nv/ComputeCache) and then omits ptxas's report, spill counts included.
/// Throws kiln::Error:
///  - Unsupported: libnvJitLink is missing, or nvJitLink does not know `arch`;
///  - CompileFailed: "nvJitLink: compiling PTX of kernel '<k>' for <arch> failed
///    (NVJITLINK_ERROR_PTX_COMPILE):\n<error log>";
///  - NotFound: the log lists entry functions but not `kernelName`.
CubinResult ptxToCubin(const std::string& ptx, const std::string& arch,
                       const std::string& kernelName,
                       const std::vector<std::string>& extraOptions = {});

/// Fills registers/spills/smem/stack/barriers of `out` from nvJitLink's verbose info log
/// for entry `kernelName`. Returns false when the log has no report for that entry.
/// Exposed for tests.
///
/// The log nvJitLink 13.0 writes with -verbose for one PTX input holds ptxas's report
/// (the primary source, and the only one with spill counts; note the continuation line's
/// "ptxas         ." prefix, which plain `ptxas -v` does not print):
///   ptxas info    : Compiling entry function '<k>' for 'sm_90a'
///   ptxas info    : Function properties for <k>
///   ptxas         .     <S> bytes stack frame, <SS> bytes spill stores, <SL> bytes spill loads
///   ptxas info    : Used <R> registers, used <B> barriers[, <X> bytes smem][, <C> bytes cmem[0]]
/// then nvJitLink's summary of the linked cubin (used only when ptxas's report is absent):
///   info    : Function properties for '<k>':
///   info    : used <R> registers, used <B> barriers, <S> stack, <X> bytes smem, <C> bytes cmem[0], <L> bytes lmem
/// ptxas omits "bytes smem" when it is 0.
bool parsePtxasInfo(const std::string& log, const std::string& kernelName, CubinResult& out);

/// ptxas's warnings and performance notes in an info log, one per line without the
/// "ptxas info    : " prefix: e.g. "(C7504) Potential Performance Loss: 'setmaxnreg'
/// ignored ..." or a wgmma serialisation warning. Empty when there are none.
std::vector<std::string> ptxasNotes(const std::string& log);
/// Appends ptxasNotes(log) to `notes` (KernelReport::ptxas_notes), "; "-separated.
void appendPtxasNotes(std::string& notes, const std::string& log);

} // namespace kiln::cuda
