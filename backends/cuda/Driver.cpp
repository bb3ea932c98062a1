#include "Driver.h"
#include "Runtime/Log.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <utility>

namespace kiln::cuda {
namespace {

constexpr const char* kDriverLibrary = "libcuda.so.1";

const char* builtinErrorName(CUresult r) {
  switch (r) {
#define KILN_CU_ERR(x) case x: return #x;
    KILN_CU_ERR(CUDA_SUCCESS)
    KILN_CU_ERR(CUDA_ERROR_INVALID_VALUE)
    KILN_CU_ERR(CUDA_ERROR_OUT_OF_MEMORY)
    KILN_CU_ERR(CUDA_ERROR_NOT_INITIALIZED)
    KILN_CU_ERR(CUDA_ERROR_DEINITIALIZED)
    KILN_CU_ERR(CUDA_ERROR_STUB_LIBRARY)
    KILN_CU_ERR(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER)
    KILN_CU_ERR(CUDA_ERROR_DEVICE_UNAVAILABLE)
    KILN_CU_ERR(CUDA_ERROR_NO_DEVICE)
    KILN_CU_ERR(CUDA_ERROR_INVALID_DEVICE)
    KILN_CU_ERR(CUDA_ERROR_INVALID_IMAGE)
    KILN_CU_ERR(CUDA_ERROR_INVALID_CONTEXT)
    KILN_CU_ERR(CUDA_ERROR_NO_BINARY_FOR_GPU)
    KILN_CU_ERR(CUDA_ERROR_ECC_UNCORRECTABLE)
    KILN_CU_ERR(CUDA_ERROR_INVALID_PTX)
    KILN_CU_ERR(CUDA_ERROR_JIT_COMPILER_NOT_FOUND)
    KILN_CU_ERR(CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
    KILN_CU_ERR(CUDA_ERROR_JIT_COMPILATION_DISABLED)
    KILN_CU_ERR(CUDA_ERROR_INVALID_HANDLE)
    KILN_CU_ERR(CUDA_ERROR_NOT_FOUND)
    KILN_CU_ERR(CUDA_ERROR_NOT_READY)
    KILN_CU_ERR(CUDA_ERROR_ILLEGAL_ADDRESS)
    KILN_CU_ERR(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    KILN_CU_ERR(CUDA_ERROR_LAUNCH_TIMEOUT)
    KILN_CU_ERR(CUDA_ERROR_CONTEXT_IS_DESTROYED)
    KILN_CU_ERR(CUDA_ERROR_ASSERT)
    KILN_CU_ERR(CUDA_ERROR_HARDWARE_STACK_ERROR)
    KILN_CU_ERR(CUDA_ERROR_ILLEGAL_INSTRUCTION)
    KILN_CU_ERR(CUDA_ERROR_MISALIGNED_ADDRESS)
    KILN_CU_ERR(CUDA_ERROR_INVALID_ADDRESS_SPACE)
    KILN_CU_ERR(CUDA_ERROR_INVALID_PC)
    KILN_CU_ERR(CUDA_ERROR_LAUNCH_FAILED)
    KILN_CU_ERR(CUDA_ERROR_NOT_PERMITTED)
    KILN_CU_ERR(CUDA_ERROR_NOT_SUPPORTED)
    KILN_CU_ERR(CUDA_ERROR_SYSTEM_NOT_READY)
    KILN_CU_ERR(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
    KILN_CU_ERR(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)
    KILN_CU_ERR(CUDA_ERROR_UNKNOWN)
#undef KILN_CU_ERR
  default: return nullptr;
  }
}

// Names an error with a specific driver (the process-wide one, or one being probed).
std::string nameWith(const Driver* d, CUresult r) {
  if (d && d->cuGetErrorName) {
    const char* s = nullptr;
    if (d->cuGetErrorName(r, &s) == CUDA_SUCCESS && s) return s;
  }
  if (const char* s = builtinErrorName(r)) return s;
  return "CUresult " + std::to_string(static_cast<int>(r));
}

std::string describeWith(const Driver* d, CUresult r) {
  std::string out = nameWith(d, r);
  if (d && d->cuGetErrorString) {
    const char* s = nullptr;
    if (d->cuGetErrorString(r, &s) == CUDA_SUCCESS && s && *s) out += std::string(" (") + s + ")";
  }
  return out;
}

// The result of loading the driver: either a Driver or the reason there is none.
struct LoadResult {
  std::unique_ptr<Driver> driver;
  std::string error;
};

LoadResult loadDriver(const char* library) {
  LoadResult out;
  void* handle = ::dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = ::dlerror();
    out.error = std::string("CUDA driver not found: dlopen(") + library + ") failed: " +
                (e ? e : "unknown error") +
                "; this machine has no NVIDIA driver (use --backend=cpu)";
    return out;
  }
  auto d = std::make_unique<Driver>();
  d->handle = handle;
  d->path = library;
  if (struct link_map* lm = nullptr; ::dlinfo(handle, RTLD_DI_LINKMAP, &lm) == 0 && lm &&
                                      lm->l_name && *lm->l_name)
    d->path = lm->l_name;

  std::vector<std::string> missing;
  auto resolve = [&](const char* name, const char* fallback) -> void* {
    void* p = ::dlsym(handle, name);
    if (!p && fallback) p = ::dlsym(handle, fallback);
    if (!p) missing.push_back(name);
    return p;
  };
#define KILN_CU_SYMBOL(name, fallback)                                                   \
  d->name = reinterpret_cast<decltype(&::name)>(resolve(#name, fallback));
#include "DriverSymbols.def"
#undef KILN_CU_SYMBOL

  if (d->cuDriverGetVersion && d->cuDriverGetVersion(&d->version) != CUDA_SUCCESS)
    d->version = 0;
  const std::string where = d->path + (d->version ? " (driver API " +
                                                        formatDriverVersion(d->version) + ")"
                                                  : std::string());
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    out.error = "CUDA driver too old: " + where + " lacks " + list +
                "; install a newer NVIDIA driver (use --backend=cpu)";
    return out; // the handle stays open: harmless, and dlclose of libcuda is unsafe
  }

  const CUresult r = d->cuInit(0);
  if (r != CUDA_SUCCESS) {
    const std::string what = "cuInit: " + describeWith(d.get(), r);
    if (r == CUDA_ERROR_NO_DEVICE)
      out.error = "CUDA driver has no GPU: " + what + "; " + where +
                  " is installed but no GPU is visible to this process (check "
                  "CUDA_VISIBLE_DEVICES; use --backend=cpu)";
    else if (r == CUDA_ERROR_STUB_LIBRARY)
      out.error = "CUDA driver is a stub: " + what + "; " + where +
                  " is the CUDA toolkit's link-time stub, not a driver (remove .../stubs "
                  "from LD_LIBRARY_PATH; use --backend=cpu)";
    else
      out.error = "CUDA driver failed to initialise: " + what + "; " + where +
                  " (use --backend=cpu)";
    return out;
  }
  int count = 0;
  if (d->cuDeviceGetCount(&count) != CUDA_SUCCESS || count <= 0) {
    out.error = "CUDA driver has no GPU: cuDeviceGetCount found none; " + where +
                " is installed but no GPU is visible to this process (check "
                "CUDA_VISIBLE_DEVICES; use --backend=cpu)";
    return out;
  }
  out.driver = std::move(d);
  return out;
}

const LoadResult& loaded() {
  // C++11 magic static: thread-safe, computed once; loadDriver never throws for a
  // missing driver, so the failure is cached too (no retry per call). Never destroyed:
  // handle destructors that run during static destruction still find the driver.
  static const LoadResult* result = new LoadResult(loadDriver(kDriverLibrary));
  return *result;
}

std::atomic<int> g_loggedFailures{0};

// The process-wide driver if loading succeeded, else nullptr. Never throws.
const Driver* loadedDriverOrNull() noexcept {
  try {
    return loaded().driver.get();
  } catch (...) {
    return nullptr;
  }
}

} // namespace

std::string detail::shortPath(const char* file) {
  const std::string f = std::string("/") + (file ? file : "?"); // relative paths match too
  for (const char* root : {"/backends/", "/lib/", "/test/", "/tools/", "/dsl/", "/bench/"}) {
    auto pos = f.rfind(root);
    if (pos != std::string::npos) return f.substr(pos + 1);
  }
  return f.substr(f.rfind('/') + 1);
}

// ---------------------------------------------------------------------------------------
// Loading, errors

const Driver& driver() {
  const LoadResult& r = loaded();
  if (!r.driver) throw Error(ErrorKind::Unsupported, r.error);
  return *r.driver;
}

bool available(std::string* why) {
  const LoadResult& r = loaded();
  if (!r.driver && why) *why = r.error;
  return r.driver != nullptr;
}

std::string formatDriverVersion(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

std::string errorName(CUresult r) { return nameWith(loadedDriverOrNull(), r); }

std::string describe(CUresult r) { return describeWith(loadedDriverOrNull(), r); }

bool isStickyError(CUresult r) {
  switch (r) {
  case CUDA_ERROR_ILLEGAL_ADDRESS:
  case CUDA_ERROR_LAUNCH_FAILED:
  case CUDA_ERROR_LAUNCH_TIMEOUT:
  case CUDA_ERROR_ASSERT:
  case CUDA_ERROR_HARDWARE_STACK_ERROR:
  case CUDA_ERROR_ILLEGAL_INSTRUCTION:
  case CUDA_ERROR_MISALIGNED_ADDRESS:
  case CUDA_ERROR_INVALID_ADDRESS_SPACE:
  case CUDA_ERROR_INVALID_PC:
  case CUDA_ERROR_ECC_UNCORRECTABLE:
  case CUDA_ERROR_CONTAINED:
  case CUDA_ERROR_TENSOR_MEMORY_LEAK:
    return true;
  default:
    return false;
  }
}

namespace detail {

std::string cuErrorMessage(CUresult r, const char* expr, const char* file, int line,
                           const std::string& context) {
  std::string msg;
  if (!context.empty()) msg = context + ": ";
  msg += std::string(expr) + " failed: " + describe(r) + " at " + shortPath(file) + ":" +
         std::to_string(line);
  if (isStickyError(r))
    msg += "; the CUDA context is now unusable (a sticky error: every later call on it "
           "fails; restart the process, or create a kiln::Runtime with "
           "RuntimeOptions::reset_after_fault, where the driver allows a reset)";
  return msg;
}

void throwCuError(CUresult r, const char* expr, const char* file, int line,
                  const std::string& context) {
  throw Error(ErrorKind::Runtime, cuErrorMessage(r, expr, file, line, context));
}

void throwCuError(ErrorKind kind, CUresult r, const char* expr, const char* file, int line,
                  const std::string& context) {
  throw Error(kind, cuErrorMessage(r, expr, file, line, context));
}

void logCuFailure(CUresult r, const char* what, const char* where) noexcept {
  if (r == CUDA_ERROR_DEINITIALIZED) return; // process exit: the driver is already gone
  g_loggedFailures.fetch_add(1, std::memory_order_relaxed);
  try {
    kiln::detail::logWarn(std::string(what) + " failed in " + where + ": " + describe(r));
  } catch (...) { // building the text ran out of memory: the count above still has it
  }
}

int loggedFailureCount() noexcept { return g_loggedFailures.load(std::memory_order_relaxed); }

std::string probeDriver(const char* libraryPath) { return loadDriver(libraryPath).error; }

} // namespace detail

// ---------------------------------------------------------------------------------------
// Devices

std::string archFor(int ccMajor, int ccMinor) {
  std::string s = "sm_" + std::to_string(ccMajor) + std::to_string(ccMinor);
  if (ccMajor >= 9) s += 'a';
  return s;
}

int deviceCount() {
  int n = 0;
  KILN_CU_CALL(cuDeviceGetCount, &n);
  return n;
}

DeviceInfo queryDevice(int ordinal) {
  const Driver& d = driver();
  const int n = deviceCount();
  if (ordinal < 0 || ordinal >= n)
    throw Error(ErrorKind::InvalidArgument,
                "CUDA device ordinal " + std::to_string(ordinal) + " is out of range: " +
                    std::to_string(n) + " device(s) visible (ordinals 0.." +
                    std::to_string(n - 1) + ")");
  CUdevice dev = 0;
  KILN_CU_CHECK(d.cuDeviceGet(&dev, ordinal));
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  KILN_CU_CHECK(d.cuDeviceGetName(name, sizeof(name) - 1, dev));
  info.name = name;
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    KILN_CU_CHECK(d.cuDeviceGetAttribute(&v, a, dev));
    return v;
  };
  info.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.max_smem_per_block_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  info.max_smem_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  size_t bytes = 0;
  KILN_CU_CHECK(d.cuDeviceTotalMem_v2(&bytes, dev));
  info.total_mem = static_cast<int64_t>(bytes);
  info.driver_version = d.version;
  return info;
}

// ---------------------------------------------------------------------------------------
// Context

Context::Context(int ordinal, bool resetAfterFault) {
  const Driver& d = driver();
  const int n = deviceCount();
  if (ordinal < 0 || ordinal >= n)
    throw Error(ErrorKind::InvalidArgument,
                "CUDA device ordinal " + std::to_string(ordinal) + " is out of range: " +
                    std::to_string(n) + " device(s) visible");
  KILN_CU_CHECK(d.cuDeviceGet(&device_, ordinal));
  KILN_CU_CHECK(d.cuCtxGetCurrent(&previous_));
  KILN_CU_CHECK_CTX(d.cuDevicePrimaryCtxRetain(&ctx_, device_),
                    "retaining the primary context of CUDA device " + std::to_string(ordinal));
  ordinal_ = ordinal;
  CUresult r = d.cuCtxSetCurrent(ctx_);
  if (r != CUDA_SUCCESS) {
    reset();
    detail::throwCuError(r, "cuCtxSetCurrent(ctx_)", __FILE__, __LINE__);
  }
  // A kernel fault (illegal address, ...) leaves the primary context unusable. Where the
  // driver allows it, a reset brings the device back (every allocation and module in it is
  // gone, as they already are in effect); for most faults it does not, and the process
  // has to restart. cuStreamQuery on the legacy stream reports a sticky error without
  // waiting for work in flight.
  r = d.cuStreamQuery(nullptr);
  if (isStickyError(r)) {
    const std::string fault = describe(r);
    if (!resetAfterFault) {
      reset();
      ordinal_ = -1;
      throw Error(ErrorKind::Runtime,
                  "CUDA device " + std::to_string(ordinal) + " is unusable in this process: an earlier kernel fault (" +
                      fault + ") is sticky; restart the process (or set RuntimeOptions::reset_after_fault to reset "
                      "the shared primary context, which frees every allocation in it, the engine's too)");
    }
    kiln::detail::logWarn("the primary context of CUDA device " + std::to_string(ordinal) + " is unusable (" + fault +
                    "); resetting it");
    CUresult rr = d.cuDevicePrimaryCtxReset_v2(device_);
    if (rr == CUDA_SUCCESS) {
      d.cuDevicePrimaryCtxRelease_v2(device_); // the reset destroyed the context we retained
      ctx_ = nullptr;
      rr = d.cuDevicePrimaryCtxRetain(&ctx_, device_);
      if (rr == CUDA_SUCCESS) rr = d.cuCtxSetCurrent(ctx_);
      if (rr == CUDA_SUCCESS) rr = d.cuStreamQuery(nullptr);
      if (rr == CUDA_ERROR_NOT_READY) rr = CUDA_SUCCESS;
    }
    if (rr != CUDA_SUCCESS) {
      if (ctx_) d.cuDevicePrimaryCtxRelease_v2(device_);
      ctx_ = nullptr;
      ordinal_ = -1;
      throw Error(ErrorKind::Runtime,
                  "CUDA device " + std::to_string(ordinal) + " is unusable in this process: an earlier kernel fault (" +
                      fault + ") is sticky, and the driver refuses to reset the context (" + describe(rr) +
                      "); restart the process to use the GPU again");
    }
  }
}

Context::~Context() { reset(); }

Context::Context(Context&& o) noexcept
    : ctx_(std::exchange(o.ctx_, nullptr)), previous_(std::exchange(o.previous_, nullptr)),
      device_(o.device_), ordinal_(std::exchange(o.ordinal_, -1)) {}

Context& Context::operator=(Context&& o) noexcept {
  if (this != &o) {
    reset();
    ctx_ = std::exchange(o.ctx_, nullptr);
    previous_ = std::exchange(o.previous_, nullptr);
    device_ = o.device_;
    ordinal_ = std::exchange(o.ordinal_, -1);
  }
  return *this;
}

void Context::reset() noexcept {
  if (!ctx_) return;
  if (const Driver* d = loadedDriverOrNull()) {
    CUcontext cur = nullptr;
    if (d->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == ctx_ && previous_ != ctx_) {
      if (CUresult r = d->cuCtxSetCurrent(previous_); r != CUDA_SUCCESS)
        detail::logCuFailure(r, "cuCtxSetCurrent(previous)", "~Context");
    }
    if (CUresult r = d->cuDevicePrimaryCtxRelease_v2(device_); r != CUDA_SUCCESS)
      detail::logCuFailure(r, "cuDevicePrimaryCtxRelease_v2", "~Context");
  }
  ctx_ = nullptr;
  previous_ = nullptr;
  ordinal_ = -1;
}

void Context::makeCurrent() const {
  if (!ctx_) throw Error(ErrorKind::Runtime, "makeCurrent on an empty kiln::cuda::Context");
  KILN_CU_CALL(cuCtxSetCurrent, ctx_);
}

void Context::synchronize() const {
  makeCurrent();
  KILN_CU_CALL(cuCtxSynchronize);
}

// ---------------------------------------------------------------------------------------
// Module

namespace {
bool isElfOrFatbin(const std::vector<char>& image) {
  if (image.size() >= 4 && std::memcmp(image.data(), "\x7f" "ELF", 4) == 0) return true;
  // fatbin wrapper magic 0xBA55ED50, little-endian
  static const unsigned char fatbin[4] = {0x50, 0xED, 0x55, 0xBA};
  return image.size() >= 4 && std::memcmp(image.data(), fatbin, 4) == 0;
}

std::string trimLog(const char* buf) {
  std::string s(buf);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\0')) s.pop_back();
  return s;
}
} // namespace

Module::Module(const void* image, std::string label, int jitThreads) : label_(std::move(label)) {
  load(image, jitThreads);
}

Module::Module(const std::vector<char>& image, std::string label, int jitThreads) : label_(std::move(label)) {
  if (image.empty())
    throw Error(ErrorKind::InvalidArgument, "module '" + label_ + "': empty image");
  if (isElfOrFatbin(image)) {
    load(image.data(), 1);
  } else {
    std::string text(image.begin(), image.end()); // PTX: the driver needs a NUL
    load(text.c_str(), jitThreads);
  }
}

Module::Module(const std::string& ptx, std::string label, int jitThreads) : label_(std::move(label)) {
  load(ptx.c_str(), jitThreads);
}

void Module::load(const void* image, int jitThreads) {
  const Driver& d = driver();
  constexpr unsigned kLogSize = 16384;
  std::vector<char> info(kLogSize, '\0'), err(kLogSize, '\0');
  auto word = [](uintptr_t v) { return reinterpret_cast<void*>(v); };
  CUjit_option opts[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                         CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                         CU_JIT_LOG_VERBOSE, CU_JIT_SPLIT_COMPILE};
  void* vals[] = {info.data(), word(kLogSize - 1), err.data(), word(kLogSize - 1), word(1),
                  word(uintptr_t(std::max(jitThreads, 0)))};
  // The split is the last option: left out where it would change nothing (one thread),
  // and where a driver older than the option refuses it (then its JIT runs on one).
  unsigned count = jitThreads == 1 ? 5 : 6;
  CUmodule loaded = nullptr;
  CUresult r = d.cuModuleLoadDataEx(&loaded, image, count, opts, vals);
  if (r == CUDA_ERROR_INVALID_VALUE && count == 6) {
    std::fill(info.begin(), info.end(), '\0');
    std::fill(err.begin(), err.end(), '\0');
    r = d.cuModuleLoadDataEx(&loaded, image, 5, opts, vals);
  }
  jit_log_ = trimLog(info.data());
  if (r == CUDA_SUCCESS) module_ = Handle<CUmodule, UnloadModule>(loaded);
  if (r != CUDA_SUCCESS) {
    std::string ctx = "loading module '" + label_ + "'";
    const std::string elog = trimLog(err.data());
    ErrorKind kind = ErrorKind::Runtime;
    switch (r) {
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
    case CUDA_ERROR_JIT_COMPILATION_DISABLED:
      kind = ErrorKind::CompileFailed;
      break;
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
      kind = ErrorKind::Unsupported;
      ctx += " (its machine code is for another GPU architecture)";
      break;
    default:
      break;
    }
    std::string msg = detail::cuErrorMessage(r, "cuModuleLoadDataEx", __FILE__, __LINE__, ctx);
    if (!elog.empty()) msg += "\n" + elog;
    throw Error(kind, msg);
  }
}

void UnloadModule::operator()(CUmodule m) const noexcept {
  if (const Driver* d = loadedDriverOrNull())
    if (CUresult r = d->cuModuleUnload(m); r != CUDA_SUCCESS) detail::logCuFailure(r, "cuModuleUnload", "~Module");
}

CUfunction Module::getFunction(const std::string& name) const {
  if (!module_)
    throw Error(ErrorKind::Runtime, "getFunction('" + name + "') on an empty kiln::cuda::Module");
  CUfunction f = nullptr;
  const CUresult r = driver().cuModuleGetFunction(&f, module_.get(), name.c_str());
  if (r == CUDA_ERROR_NOT_FOUND)
    throw Error(ErrorKind::NotFound, "kernel '" + name + "' not found in CUDA module '" +
                                         label_ + "' (cuModuleGetFunction: " + describe(r) +
                                         "); the PTX entry name must match exactly");
  if (r != CUDA_SUCCESS)
    detail::throwCuError(r, "cuModuleGetFunction", __FILE__, __LINE__,
                         "looking up kernel '" + name + "' in module '" + label_ + "'");
  return f;
}

// ---------------------------------------------------------------------------------------
// Functions and launch

FunctionInfo queryFunction(CUfunction f) {
  const Driver& d = driver();
  auto attr = [&](CUfunction_attribute a) {
    int v = 0;
    KILN_CU_CHECK(d.cuFuncGetAttribute(&v, a, f));
    return v;
  };
  FunctionInfo fi;
  fi.registers = attr(CU_FUNC_ATTRIBUTE_NUM_REGS);
  fi.local_bytes = attr(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
  fi.static_smem_bytes = attr(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
  fi.max_threads_per_block = attr(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  fi.ptx_version = attr(CU_FUNC_ATTRIBUTE_PTX_VERSION);
  fi.binary_version = attr(CU_FUNC_ATTRIBUTE_BINARY_VERSION);
  return fi;
}

void setMaxDynamicSharedMemory(CUfunction f, int bytes, const std::string& kernelName) {
  KILN_CU_CHECK_CTX(
      driver().cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
      "kernel '" + kernelName + "': raising its dynamic shared memory limit to " +
          std::to_string(bytes) + " bytes");
}

namespace {
/// "launching kernel 'k' with grid (...)[ in clusters of c], block (...), n bytes ...".
std::string launchContext(const std::string& kernelName, std::array<unsigned, 3> grid, std::array<unsigned, 3> block,
                          unsigned cluster, unsigned dynamicSmemBytes) {
  std::ostringstream ctx;
  ctx << "launching kernel '" << kernelName << "' with grid (" << grid[0] << ", " << grid[1] << ", " << grid[2] << ")";
  if (cluster > 1) ctx << " in clusters of " << cluster;
  ctx << ", block (" << block[0] << ", " << block[1] << ", " << block[2] << "), " << dynamicSmemBytes
      << " bytes dynamic shared memory";
  return ctx.str();
}
} // namespace

void launchKernel(CUfunction f, const std::string& kernelName, std::array<unsigned, 3> grid,
                  std::array<unsigned, 3> block, unsigned dynamicSmemBytes, CUstream stream,
                  void** params) {
  const CUresult r = driver().cuLaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1],
                                             block[2], dynamicSmemBytes, stream, params, nullptr);
  if (r != CUDA_SUCCESS)
    detail::throwCuError(r, "cuLaunchKernel", __FILE__, __LINE__, launchContext(kernelName, grid, block, 1, dynamicSmemBytes));
}

namespace {
/// Clusters of `cluster` CTAs along grid.x.
CUlaunchAttribute clusterAttribute(unsigned cluster) {
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim.x = cluster;
  attr.value.clusterDim.y = 1;
  attr.value.clusterDim.z = 1;
  return attr;
}
} // namespace

void launchKernelEx(CUfunction f, const std::string& kernelName, std::array<unsigned, 3> grid,
                    std::array<unsigned, 3> block, unsigned cluster, unsigned dynamicSmemBytes, CUstream stream,
                    void** params) {
  CUlaunchAttribute attr = clusterAttribute(cluster);
  CUlaunchConfig config{};
  config.gridDimX = grid[0], config.gridDimY = grid[1], config.gridDimZ = grid[2];
  config.blockDimX = block[0], config.blockDimY = block[1], config.blockDimZ = block[2];
  config.sharedMemBytes = dynamicSmemBytes;
  config.hStream = stream;
  config.attrs = cluster > 1 ? &attr : nullptr;
  config.numAttrs = cluster > 1 ? 1 : 0;
  const CUresult r = driver().cuLaunchKernelEx(&config, f, params, nullptr);
  if (r != CUDA_SUCCESS)
    detail::throwCuError(r, "cuLaunchKernelEx", __FILE__, __LINE__,
                         launchContext(kernelName, grid, block, cluster, dynamicSmemBytes));
}

int64_t maxActiveClusters(CUfunction f, unsigned cluster, unsigned threads, unsigned dynamicSmemBytes) {
  CUlaunchAttribute attr = clusterAttribute(cluster);
  CUlaunchConfig config{};
  config.gridDimX = cluster, config.gridDimY = 1, config.gridDimZ = 1;
  config.blockDimX = threads, config.blockDimY = 1, config.blockDimZ = 1;
  config.sharedMemBytes = dynamicSmemBytes;
  config.attrs = &attr;
  config.numAttrs = 1;
  int n = 0;
  return driver().cuOccupancyMaxActiveClusters(&n, f, &config) == CUDA_SUCCESS ? n : 0;
}

PointerInfo pointerInfo(CUdeviceptr p) {
  // One driver call for the three (a launch asks for each tensor argument). An unknown
  // pointer is not an error here: the attributes keep the values set below.
  PointerInfo info;
  int ordinal = -1;
  CUdeviceptr start = 0;
  size_t size = 0;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* data[] = {&ordinal, &start, &size};
  if (driver().cuPointerGetAttributes(3, attrs, data, p) != CUDA_SUCCESS || ordinal < 0) return info;
  info.ordinal = ordinal;
  if (start <= p && size > 0) info.start = start, info.size = size;
  return info;
}

// ---------------------------------------------------------------------------------------
// DeviceBuffer

DeviceBuffer::DeviceBuffer(size_t bytes) {
  if (bytes == 0) return;
  KILN_CU_CHECK_CTX(driver().cuMemAlloc_v2(ptr_.out(), bytes),
                    "allocating " + std::to_string(bytes) + " bytes of device memory");
  size_ = bytes;
}

void FreeDeviceMemory::operator()(CUdeviceptr p) const noexcept {
  if (const Driver* d = loadedDriverOrNull())
    if (CUresult r = d->cuMemFree_v2(p); r != CUDA_SUCCESS) detail::logCuFailure(r, "cuMemFree_v2", "~DeviceBuffer");
}

void DeviceBuffer::checkRange(size_t bytes, size_t offset, const char* op) const {
  if (offset > size() || bytes > size() - offset)
    throw Error(ErrorKind::InvalidArgument,
                std::string(op) + " of " + std::to_string(bytes) + " bytes at offset " +
                    std::to_string(offset) + " is outside a device buffer of " +
                    std::to_string(size()) + " bytes");
}

void DeviceBuffer::upload(const void* src, size_t bytes, size_t offset) {
  checkRange(bytes, offset, "upload");
  if (bytes) KILN_CU_CALL(cuMemcpyHtoD_v2, ptr() + offset, src, bytes);
}

void DeviceBuffer::download(void* dst, size_t bytes, size_t offset) const {
  checkRange(bytes, offset, "download");
  if (bytes) KILN_CU_CALL(cuMemcpyDtoH_v2, dst, ptr() + offset, bytes);
}

void DeviceBuffer::uploadAsync(const void* src, size_t bytes, CUstream stream, size_t offset) {
  checkRange(bytes, offset, "uploadAsync");
  if (bytes) KILN_CU_CALL(cuMemcpyHtoDAsync_v2, ptr() + offset, src, bytes, stream);
}

void DeviceBuffer::downloadAsync(void* dst, size_t bytes, CUstream stream, size_t offset) const {
  checkRange(bytes, offset, "downloadAsync");
  if (bytes) KILN_CU_CALL(cuMemcpyDtoHAsync_v2, dst, ptr() + offset, bytes, stream);
}

// cuMemsetD8/D32 on device memory return before the fill is done (they are queued on the
// legacy stream), and a CU_STREAM_NON_BLOCKING stream is not ordered after it.
void DeviceBuffer::fillBytes(uint8_t value, bool wait) {
  if (!size()) return;
  KILN_CU_CALL(cuMemsetD8_v2, ptr(), value, size());
  if (wait) KILN_CU_CALL(cuStreamSynchronize, nullptr);
}

void DeviceBuffer::fillWords(uint32_t value, bool wait) {
  if (size() % 4 != 0)
    throw Error(ErrorKind::InvalidArgument,
                "fillWords needs a buffer size that is a multiple of 4 bytes, got " +
                    std::to_string(size()));
  if (!size()) return;
  KILN_CU_CALL(cuMemsetD32_v2, ptr(), value, size() / 4);
  if (wait) KILN_CU_CALL(cuStreamSynchronize, nullptr);
}

// ---------------------------------------------------------------------------------------
// Stream

Stream::Stream(unsigned flags) { KILN_CU_CALL(cuStreamCreate, stream_.out(), flags); }

void DestroyStream::operator()(CUstream s) const noexcept {
  if (const Driver* d = loadedDriverOrNull())
    if (CUresult r = d->cuStreamDestroy_v2(s); r != CUDA_SUCCESS) detail::logCuFailure(r, "cuStreamDestroy_v2", "~Stream");
}

void Stream::synchronize() const { KILN_CU_CALL(cuStreamSynchronize, stream_.get()); }

// ---------------------------------------------------------------------------------------
// Event

Event::Event(unsigned flags) { KILN_CU_CALL(cuEventCreate, event_.out(), flags); }

void DestroyEvent::operator()(CUevent e) const noexcept {
  if (const Driver* d = loadedDriverOrNull())
    if (CUresult r = d->cuEventDestroy_v2(e); r != CUDA_SUCCESS) detail::logCuFailure(r, "cuEventDestroy_v2", "~Event");
}

void DestroyGraph::operator()(CUgraph g) const noexcept {
  if (const Driver* d = loadedDriverOrNull())
    if (CUresult r = d->cuGraphDestroy(g); r != CUDA_SUCCESS) detail::logCuFailure(r, "cuGraphDestroy", "a graph's handle");
}

void DestroyGraphExec::operator()(CUgraphExec e) const noexcept {
  if (const Driver* d = loadedDriverOrNull())
    if (CUresult r = d->cuGraphExecDestroy(e); r != CUDA_SUCCESS)
      detail::logCuFailure(r, "cuGraphExecDestroy", "a graph's handle");
}

void Event::record(CUstream stream) const { KILN_CU_CALL(cuEventRecord, event_.get(), stream); }

void Event::synchronize() const { KILN_CU_CALL(cuEventSynchronize, event_.get()); }

float Event::elapsedMs(const Event& start, const Event& stop) {
  float ms = 0.f;
  KILN_CU_CALL(cuEventElapsedTime_v2, &ms, start.event_.get(), stop.event_.get());
  return ms;
}

} // namespace kiln::cuda
