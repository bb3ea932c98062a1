#include "kiln/runtime.hpp"

#include "kiln/error.hpp"
#include "Runtime/Nvtx.h"
#include "Runtime/ParallelFor.h"
#include "Runtime/RuntimeImpl.h"

#include <exception>
#include <future>
#include <optional>
#include <system_error>

namespace kiln {

const char* to_string(Backend b) {
  switch (b) {
  case Backend::automatic: return "auto";
  case Backend::cpu: return "cpu";
  case Backend::cuda: return "cuda";
  }
  return "?";
}

Backend parse_backend(const std::string& name) {
  if (name == "auto") return Backend::automatic;
  if (name == "cpu") return Backend::cpu;
  if (name == "cuda") return Backend::cuda;
  throw Error(ErrorKind::NotFound, "unknown backend '" + name + "' (expected auto, cpu or cuda)");
}

Stage parse_stage(const std::string& name) {
  static const std::pair<const char*, Stage> stages[] = {
      {"tile", Stage::tile}, {"layouts", Stage::layouts}, {"mlir", Stage::mlir},
      {"llvm", Stage::llvm}, {"ptx", Stage::ptx},         {"cubin", Stage::cubin}};
  for (auto& [n, s] : stages)
    if (name == n) return s;
  throw Error(ErrorKind::NotFound,
              "unknown stage '" + name + "' (expected tile, layouts, mlir, llvm, ptx or cubin)");
}

std::string KernelReport::str() const {
  std::string s = target;
  if (registers >= 0) s += ": " + std::to_string(registers) + " registers";
  if (spill_bytes >= 0) s += ", " + std::to_string(spill_bytes) + " spill bytes";
  if (threads > 1) s += ", " + std::to_string(shared_bytes) + " B smem, " + std::to_string(threads) + " threads";
  if (!grid.empty()) s += ", grid " + grid;
  if (!sm90.empty()) s += "; sm_90a twin: " + sm90;
  if (!ptxas_notes.empty()) s += "; ptxas: " + ptxas_notes;
  return s;
}

namespace {
std::shared_ptr<detail::RuntimeImpl> makeImpl(Backend backend, const RuntimeOptions& options) {
  if (backend == Backend::cuda) return detail::makeCudaRuntime(options);
  if (backend == Backend::automatic) {
    std::string why;
    if (detail::cudaAvailable(&why)) {
      try {
        return detail::makeCudaRuntime(options);
      } catch (const Error& e) { // e.g. a GPU older than Ampere: the CPU still works
        why = e.what();
      }
    }
    return detail::makeCpuRuntime(options, "cuda: " + why);
  }
  return detail::makeCpuRuntime(options, "");
}
} // namespace

Runtime Runtime::create(Backend backend, const RuntimeOptions& options) {
  if (options.deploy_entries && !options.compile_only)
    throw Error(ErrorKind::InvalidArgument,
                "RuntimeOptions::deploy_entries makes a GPU machine's cache entries on a machine without one: it needs "
                "compile_only (a runtime on a GPU writes those entries anyway)");
  if (options.compile_threads < 0)
    throw Error(ErrorKind::InvalidArgument, "RuntimeOptions::compile_threads must be 0 (one per CPU core) or more, got " +
                                                std::to_string(options.compile_threads));
  auto impl = makeImpl(backend, options);
  detail::configureCache(*impl, options);
  return Runtime(std::move(impl));
}

Backend Runtime::backend() const { return impl_->backend; }
const std::string& Runtime::describe() const { return impl_->description; }
CompiledKernel Runtime::compile(const Kernel& kernel) const { return detail::compileCached(*impl_, kernel); }
struct PendingKernel::State {
  std::future<CompiledKernel> result; // invalid once get() took it
};
PendingKernel::PendingKernel(std::unique_ptr<State> state) : state_(std::move(state)) {}
PendingKernel::PendingKernel(PendingKernel&&) noexcept = default;
PendingKernel& PendingKernel::operator=(PendingKernel&&) noexcept = default;
PendingKernel::~PendingKernel() = default; // a std::async future waits for its thread
bool PendingKernel::ready() const {
  return state_ && state_->result.valid() &&
         state_->result.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}
CompiledKernel PendingKernel::get() {
  if (!state_ || !state_->result.valid())
    throw Error(ErrorKind::InvalidArgument, "PendingKernel::get: the kernel was already taken (get() gives it once)");
  return state_->result.get();
}

PendingKernel Runtime::compile_async(const Kernel& kernel) const {
  auto state = std::make_unique<PendingKernel::State>();
  try { // the thread holds the runtime and the kernel (shared handles) until it ends
    state->result = std::async(std::launch::async, [rt = *this, kernel] { return rt.compile(kernel); });
  } catch (const std::system_error& e) {
    throw Error(ErrorKind::Runtime, "compile_async('" + kernel.name() + "'): no thread to compile on: " + e.what());
  }
  return PendingKernel(std::move(state));
}

std::vector<CompiledKernel> Runtime::compile_all(const std::vector<Kernel>& kernels, int threads) const {
  const size_t n = kernels.size();
  std::vector<std::optional<CompiledKernel>> done(n);
  std::vector<std::exception_ptr> failed(n);
  detail::parallelFor(n, threads, [&](size_t i) {
    try {
      done[i].emplace(compile(kernels[i]));
    } catch (...) { // kept for its turn below: every kernel gets its compile first
      failed[i] = std::current_exception();
    }
  });
  for (size_t i = 0; i < n; ++i)
    if (failed[i]) std::rethrow_exception(failed[i]);
  std::vector<CompiledKernel> out;
  out.reserve(n);
  for (std::optional<CompiledKernel>& k : done) out.push_back(std::move(*k));
  return out;
}

CacheStats Runtime::cache_stats() const {
  std::lock_guard<std::mutex> lock(impl_->cacheMu);
  return impl_->cacheStats;
}
std::string Runtime::cache_dir() const { return impl_->disk ? impl_->disk->dir() : std::string(); }
std::string Runtime::emit(const Kernel& kernel, Stage stage) const { return impl_->emit(kernel, stage); }

DeviceTensor Runtime::allocate(DType dtype, const std::vector<int64_t>& dims) const {
  auto t = impl_->allocate(dtype, dims);
  t->meter = impl_->meter;
  t->bytes = t->view.numel() * int64_t(size_of(dtype));
  t->meter->add(t->bytes);
  return DeviceTensor(std::move(t));
}

Fingerprint Runtime::fingerprint() const {
  Fingerprint f = impl_->fingerprint();
  f.kiln = detail::kilnVersion();
  f.llvm = detail::llvmVersion();
  return f;
}

std::string Fingerprint::diff(const Fingerprint& o) const {
  std::string s;
  auto cmp = [&](const char* name, const std::string& a, const std::string& b) {
    if (a != b) s += (s.empty() ? "" : "; ") + std::string(name) + ": " + a + " vs " + b;
  };
  cmp("backend", backend, o.backend);
  cmp("device", device, o.device);
  cmp("sm_count", std::to_string(sm_count), std::to_string(o.sm_count));
  cmp("driver", driver, o.driver);
  cmp("target", target, o.target);
  cmp("compiler", compiler, o.compiler);
  cmp("kiln", kiln, o.kiln);
  cmp("llvm", llvm, o.llvm);
  return s;
}

MemoryStats Runtime::memory() const { return {impl_->meter->in_use.load(), impl_->meter->peak.load()}; }
void Runtime::reset_peak_memory() const { impl_->meter->peak = impl_->meter->in_use.load(); }

DeviceTensor Runtime::upload(const HostTensor& host) const {
  DeviceTensor t = allocate(host.dtype(), host.dims());
  impl_->upload(host, *t.impl_);
  return t;
}

void Runtime::download(const DeviceTensor& from, HostTensor& to) const {
  if (!from.impl_) throw Error(ErrorKind::InvalidArgument, "download from an empty DeviceTensor");
  if (to.dtype() != from.impl_->view.dtype || to.dims() != from.impl_->view.dims)
    throw Error(ErrorKind::InvalidArgument, "download of " + from.impl_->view.describe() +
                                                " into a host tensor of another dtype or shape");
  impl_->download(*from.impl_, to);
}

void Runtime::synchronize() const { impl_->synchronize(); }

CompiledKernel::CompiledKernel(std::unique_ptr<detail::CompiledImpl> impl) : impl_(std::move(impl)) {}
CompiledKernel::CompiledKernel(std::shared_ptr<detail::CompiledImpl> impl, CacheInfo cache)
    : impl_(std::move(impl)), cache_(std::move(cache)) {}
const CacheInfo& CompiledKernel::cache() const { return cache_; }
CompiledKernel::CompiledKernel(CompiledKernel&&) noexcept = default;
CompiledKernel& CompiledKernel::operator=(CompiledKernel&&) noexcept = default;
CompiledKernel::~CompiledKernel() = default;
const KernelSignature& CompiledKernel::signature() const { return impl_->sig; }
Backend CompiledKernel::backend() const { return impl_->backend; }
const CompileTimes& CompiledKernel::times() const {
  impl_->settle();
  return impl_->times;
}
const KernelReport& CompiledKernel::report() const {
  impl_->settle();
  return impl_->report;
}
const std::string& CompiledKernel::binary() const { return impl_->binary; }
void CompiledKernel::launch(const std::vector<TensorView>& args) const {
  detail::NvtxRange range("launch", impl_->sig.name);
  impl_->launch(args, nullptr, true);
}
std::string CompiledKernel::launch_path(const std::vector<TensorView>& args) const { return impl_->launchPath(args); }
void CompiledKernel::launch(const std::vector<TensorView>& args, void* stream) const {
  detail::NvtxRange range("launch", impl_->sig.name);
  impl_->launch(args, stream, false);
}

DeviceTensor::DeviceTensor() = default;
DeviceTensor::DeviceTensor(std::unique_ptr<detail::DeviceTensorImpl> impl) : impl_(std::move(impl)) {}
DeviceTensor::DeviceTensor(DeviceTensor&&) noexcept = default;
DeviceTensor& DeviceTensor::operator=(DeviceTensor&&) noexcept = default;
DeviceTensor::~DeviceTensor() = default;
TensorView DeviceTensor::view() const { return impl_ ? impl_->view : TensorView{}; }

} // namespace kiln
