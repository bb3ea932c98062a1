#pragma once
// Internal: the CUDA driver API, loaded with dlopen (never linked), plus move-only RAII
// wrappers for the driver handles kiln owns. Never included from include/kiln: it carries
// CUDA types.
//
// Style (after IREE's cuda HAL):
//  - every entry point lives in one X-macro table (DriverSymbols.def) and is resolved once,
//    thread-safely, by driver();
//  - every call goes through KILN_CU_CHECK / KILN_CU_CALL, which turn a CUresult into a
//    kiln::Error with the call's text, the error's name and description, and file:line;
//  - wrapper destructors are noexcept: a failure there is logged (kiln/log.hpp), never thrown.
//
// Only cuda.h's *types* are used here (decltype of the declared prototypes names each
// entry point's type); no cu* symbol is referenced at link time.
#include <cuda.h>

#include <array>
#include <cstddef>
#include <utility>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/error.hpp"

#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
#error "kiln resolves the legacy-stream driver entry points; do not define CUDA_API_PER_THREAD_DEFAULT_STREAM"
#endif
#if CUDA_VERSION < 12080
#error "kiln's driver table uses CUDA 12.8+ names (cuEventElapsedTime_v2): build against CUDA 12.8 or newer headers"
#endif

namespace kiln::cuda {

/// The resolved driver: one function pointer per line of DriverSymbols.def, named like the
/// exported (versioned) symbol, e.g. `driver().cuMemAlloc_v2(&p, n)`.
struct Driver {
#define KILN_CU_SYMBOL(name, fallback) decltype(&::name) name = nullptr;
#include "DriverSymbols.def"
#undef KILN_CU_SYMBOL

  int version = 0;    ///< cuDriverGetVersion, e.g. 13000 for CUDA 13.0
  std::string path;   ///< the file dlopen found, e.g. /usr/lib/x86_64-linux-gnu/libcuda.so.1
  void* handle = nullptr; ///< never dlclose'd: handles outlive static destructors

  Driver() = default;
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;
};

/// The driver, loaded and cuInit'ed on first use (thread-safe; the outcome, success or
/// failure, is computed once and cached). Throws kiln::Error(Unsupported) when
/// libcuda.so.1 is missing, lacks a symbol, is the toolkit's stub, or cuInit fails
/// (e.g. CUDA_ERROR_NO_DEVICE), with a message saying which and what to do.
const Driver& driver();

/// Non-throwing check: true when driver() would succeed; otherwise false and, when `why`
/// is given, driver()'s message.
bool available(std::string* why = nullptr);

/// "13.0" for 13000.
std::string formatDriverVersion(int version);

/// "CUDA_ERROR_NO_DEVICE" (from the driver when loaded, else a built-in table, else
/// "CUresult 1234").
std::string errorName(CUresult r);

/// "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)".
std::string describe(CUresult r);

/// True for the errors after which the context is corrupt and every later call on it
/// fails (illegal address, launch failure, trap/assert, misaligned address, ...).
bool isStickyError(CUresult r);

namespace detail {
/// Throws kiln::Error(Runtime): "[<context>: ]<expr> failed: CUDA_ERROR_X (<text>) at
/// <file>:<line>[; the CUDA context is now unusable ...]".
[[noreturn]] void throwCuError(CUresult r, const char* expr, const char* file, int line,
                               const std::string& context = {});
/// Same text, kind chosen by the caller (e.g. CompileFailed for a PTX JIT failure).
[[noreturn]] void throwCuError(ErrorKind kind, CUresult r, const char* expr,
                               const char* file, int line, const std::string& context);
/// The message throwCuError would use (tests, logs).
std::string cuErrorMessage(CUresult r, const char* expr, const char* file, int line,
                           const std::string& context = {});
/// Logs the warning "<what> failed in <where>: CUDA_ERROR_X (...)" (kiln/log.hpp). Silent for
/// CUDA_ERROR_DEINITIALIZED (the driver is shutting down at process exit). Never throws.
void logCuFailure(CUresult r, const char* what, const char* where) noexcept;
/// How many failures logCuFailure has logged in this process (tests).
int loggedFailureCount() noexcept;
/// Loads the driver from `libraryPath` (not cached, not shared with driver()) and
/// returns "" on success or the message driver() would throw. For tests that point at
/// the toolkit's stub libcuda.so: do that in a child process, since the stub's soname is
/// libcuda.so.1.
std::string probeDriver(const char* libraryPath);
/// "backends/cuda/Driver.cpp" from an absolute __FILE__: the file:line in every library
/// error message (the driver's, cuBLASLt's, cuDNN's), short and stable.
std::string shortPath(const char* file);
} // namespace detail

/// The largest power of two, at most `most`, dividing the address: what a library may
/// assume of an operand's alignment (cuBLASLt's heuristic, cuDNN's plans).
inline uint64_t alignmentOf(CUdeviceptr p, uint64_t most) {
  uint64_t a = most;
  while (a > 1 && p % a != 0) a /= 2;
  return a;
}

} // namespace kiln::cuda

/// Evaluates a CUresult expression; on failure throws kiln::Error(Runtime) naming the
/// expression, the error and file:line.
#define KILN_CU_CHECK(expr)                                                              \
  do {                                                                                   \
    const CUresult kiln_cu_result_ = (expr);                                             \
    if (kiln_cu_result_ != CUDA_SUCCESS)                                                 \
      ::kiln::cuda::detail::throwCuError(kiln_cu_result_, #expr, __FILE__, __LINE__);    \
  } while (0)

/// As KILN_CU_CHECK, with a prefix saying what kiln was doing ("allocating 4096 bytes").
#define KILN_CU_CHECK_CTX(expr, context)                                                 \
  do {                                                                                   \
    const CUresult kiln_cu_result_ = (expr);                                             \
    if (kiln_cu_result_ != CUDA_SUCCESS)                                                 \
      ::kiln::cuda::detail::throwCuError(kiln_cu_result_, #expr, __FILE__, __LINE__,     \
                                         (context));                                     \
  } while (0)

/// Calls driver().fn(args...) and checks it; the message reads "fn(args) failed: ...".
#define KILN_CU_CALL(fn, ...)                                                            \
  do {                                                                                   \
    const CUresult kiln_cu_result_ = ::kiln::cuda::driver().fn(__VA_ARGS__);             \
    if (kiln_cu_result_ != CUDA_SUCCESS)                                                 \
      ::kiln::cuda::detail::throwCuError(kiln_cu_result_, #fn "(" #__VA_ARGS__ ")",      \
                                         __FILE__, __LINE__);                            \
  } while (0)

namespace kiln::cuda {

/// A move-only owner of one driver object: `Release{}(value)` runs exactly once, when the
/// owner is destroyed or assigned over, unless the value is empty (`T{}`). Release is
/// noexcept: it logs a failure (detail::logCuFailure), never throws, and does nothing when
/// the driver is not loaded. The wrappers below hold one instead of writing their own moves.
template <class T, class Release> class Handle {
public:
  Handle() = default;
  explicit Handle(T value) : value_(value) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : value_(std::exchange(o.value_, T{})) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      value_ = std::exchange(o.value_, T{});
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  const T& get() const { return value_; }
  explicit operator bool() const { return !(value_ == T{}); }
  /// Where a cu*Create writes the new object (the old one is released first).
  T* out() {
    reset();
    return &value_;
  }
  void reset() noexcept {
    if (*this) Release{}(value_);
    value_ = T{};
  }

private:
  T value_{};
};

struct UnloadModule { void operator()(CUmodule m) const noexcept; };
struct FreeDeviceMemory { void operator()(CUdeviceptr p) const noexcept; };
struct DestroyStream { void operator()(CUstream s) const noexcept; };
struct DestroyEvent { void operator()(CUevent e) const noexcept; };
struct DestroyGraph { void operator()(CUgraph g) const noexcept; };
struct DestroyGraphExec { void operator()(CUgraphExec e) const noexcept; };

/// The arch string kiln compiles for. Rule: compute capability 9.0 and newer (Hopper,
/// Blackwell, ...) get the 'a' suffix, which enables the arch-specific features kiln's
/// fast paths use (wgmma, setmaxnreg, tcgen05, ...); older GPUs get the plain name.
/// 9.0 -> sm_90a, 10.0 -> sm_100a, 12.0 -> sm_120a, 8.0 -> sm_80, 8.6 -> sm_86.
/// An 'a' cubin runs only on exactly that compute capability (no forward compatibility),
/// so kiln always compiles for the device it runs on and keys its cache on this string.
std::string archFor(int ccMajor, int ccMinor);

struct DeviceInfo {
  int ordinal = -1;
  std::string name;              ///< "NVIDIA H200"
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int max_smem_per_block_optin = 0; ///< bytes, after cuFuncSetAttribute opt-in
  int max_smem_per_block = 0;       ///< bytes, without opt-in (48 KiB)
  int64_t total_mem = 0;            ///< bytes
  int driver_version = 0;           ///< 13000 for CUDA 13.0

  std::string arch() const { return archFor(cc_major, cc_minor); }
};

/// Number of visible devices (driver() must succeed).
int deviceCount();

/// Queries device `ordinal`; kiln::Error(InvalidArgument) when out of range.
DeviceInfo queryDevice(int ordinal);

/// Retains the primary context of a device (the one the CUDA runtime, hence the engine
/// embedding kiln, also uses) and makes it current on the constructing thread. The
/// destructor restores the context that was current before (when this one is still
/// current on the destroying thread) and releases the primary context.
class Context {
public:
  Context() = default; ///< empty
  /// `resetAfterFault`: when an earlier kernel fault left the primary context unusable,
  /// reset it (which frees every allocation in it, the embedding engine's too) instead of
  /// refusing with an error. The driver may still refuse.
  explicit Context(int ordinal, bool resetAfterFault = false);
  ~Context();
  Context(Context&& other) noexcept;
  Context& operator=(Context&& other) noexcept;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  CUcontext get() const { return ctx_; }
  CUdevice device() const { return device_; }
  int ordinal() const { return ordinal_; }
  explicit operator bool() const { return ctx_ != nullptr; }

  void makeCurrent() const;  ///< cuCtxSetCurrent on the calling thread
  void synchronize() const;  ///< cuCtxSynchronize (makes it current first)

private:
  void reset() noexcept;
  CUcontext ctx_ = nullptr;
  CUcontext previous_ = nullptr;
  CUdevice device_ = 0;
  int ordinal_ = -1;
};

/// A loaded module. The image is a cubin (ELF), a fatbin, or NUL-terminated PTX (which the
/// driver JIT-compiles: the fallback when nvJitLink is absent). A context must be current.
/// `jitThreads`: the threads the driver's JIT may use on PTX (CU_JIT_SPLIT_COMPILE; 0: one
/// per CPU, 1: one, the driver's default); a driver that does not know the option JITs on one.
class Module {
public:
  Module() = default;
  /// `label` names the module in errors (usually the kernel's name).
  Module(const void* image, std::string label, int jitThreads = 1);
  /// A cubin/fatbin, or PTX text (copied and NUL-terminated when it is not ELF/fatbin).
  Module(const std::vector<char>& image, std::string label, int jitThreads = 1);
  Module(const std::string& ptx, std::string label, int jitThreads = 1);

  CUmodule get() const { return module_.get(); }
  const std::string& label() const { return label_; }
  /// The driver's JIT info log (non-empty only for PTX images).
  const std::string& jitLog() const { return jit_log_; }

  /// The kernel's handle; kiln::Error(NotFound) naming the kernel and module when the
  /// module has no such entry.
  CUfunction getFunction(const std::string& name) const;

private:
  void load(const void* image, int jitThreads);
  Handle<CUmodule, UnloadModule> module_;
  std::string label_;
  std::string jit_log_;
};

/// What the loaded machine code of a kernel uses (cuFuncGetAttribute).
struct FunctionInfo {
  int registers = 0;        ///< per thread
  int local_bytes = 0;      ///< per thread (stack + spills)
  int static_smem_bytes = 0;
  int max_threads_per_block = 0;
  int ptx_version = 0;      ///< e.g. 80 for PTX ISA 8.0
  int binary_version = 0;   ///< e.g. 90 for sm_90
};
FunctionInfo queryFunction(CUfunction f);

/// Raises the kernel's dynamic shared-memory limit (needed above 48 KiB).
void setMaxDynamicSharedMemory(CUfunction f, int bytes, const std::string& kernelName);

/// cuLaunchKernel with an error naming the kernel and the launch shape.
void launchKernel(CUfunction f, const std::string& kernelName, std::array<unsigned, 3> grid,
                  std::array<unsigned, 3> block, unsigned dynamicSmemBytes, CUstream stream,
                  void** params);
/// How many clusters of `cluster` CTAs of `f` (`threads` each, `dynamicSmemBytes`) fit on
/// the device at once; 0 where the driver cannot say (the caller estimates).
int64_t maxActiveClusters(CUfunction f, unsigned cluster, unsigned threads, unsigned dynamicSmemBytes);
/// cuLaunchKernelEx (how launch plans are launched): with `cluster` above 1, grid.x split
/// into clusters of that many CTAs (grid[0] a multiple); 1: no launch attribute at all.
void launchKernelEx(CUfunction f, const std::string& kernelName, std::array<unsigned, 3> grid,
                    std::array<unsigned, 3> block, unsigned cluster, unsigned dynamicSmemBytes, CUstream stream,
                    void** params);

/// What CUDA knows of an address: the device it was allocated on (-1 when CUDA does not
/// know it: host memory, garbage) and the allocation it lies in ([start, start + size);
/// size 0 when unknown). Never throws for an unknown pointer.
struct PointerInfo {
  int ordinal = -1;
  CUdeviceptr start = 0;
  size_t size = 0;
};
PointerInfo pointerInfo(CUdeviceptr p);
inline int pointerDeviceOrdinal(CUdeviceptr p) { return pointerInfo(p).ordinal; }

/// Device memory from cuMemAlloc. A context must be current.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes); ///< bytes == 0: an empty buffer (ptr() == 0)

  CUdeviceptr ptr() const { return ptr_.get(); }
  size_t size() const { return ptr_ ? size_ : 0; } ///< 0 once moved from

  /// Synchronous copies; kiln::Error(InvalidArgument) when [offset, offset+bytes) is
  /// outside the buffer.
  void upload(const void* src, size_t bytes, size_t offset = 0);
  void download(void* dst, size_t bytes, size_t offset = 0) const;
  void uploadAsync(const void* src, size_t bytes, CUstream stream, size_t offset = 0);
  void downloadAsync(void* dst, size_t bytes, CUstream stream, size_t offset = 0) const;
  /// Fill every byte / every 32-bit word (size must be a multiple of 4). On the legacy
  /// stream; with `wait` (the default) done when this returns, so work on any stream
  /// (an engine's non-blocking one too) sees it. Without, ordered only before later work
  /// on the legacy stream (the profiler's cache flush, timed there).
  void fillBytes(uint8_t value, bool wait = true);
  void fillWords(uint32_t value, bool wait = true);

private:
  void checkRange(size_t bytes, size_t offset, const char* op) const;
  Handle<CUdeviceptr, FreeDeviceMemory> ptr_;
  size_t size_ = 0;
};

class Stream {
public:
  /// Non-blocking by default: it does not synchronise with the legacy NULL stream.
  explicit Stream(unsigned flags = CU_STREAM_NON_BLOCKING);

  CUstream get() const { return stream_.get(); }
  void synchronize() const;

private:
  Handle<CUstream, DestroyStream> stream_;
};

class Event {
public:
  explicit Event(unsigned flags = CU_EVENT_DEFAULT);

  CUevent get() const { return event_.get(); }
  void record(CUstream stream) const;
  void synchronize() const;
  /// Milliseconds between two recorded, completed events (cuEventElapsedTime_v2).
  static float elapsedMs(const Event& start, const Event& stop);

private:
  Handle<CUevent, DestroyEvent> event_;
};

} // namespace kiln::cuda
