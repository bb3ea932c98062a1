// A launch allocates nothing on the heap (for kernels of up to 16 arguments): an engine
// launches from its serving threads, where an allocation may wait on a lock every other
// thread shares, and a graph of many small kernels launches thousands of times a second.
// This program replaces the global operator new (so every C++ allocation, the library's
// included, is counted while `counting` is set) and launches catalogue kernels on the CPU
// backend: kiln's own launch path, which the CUDA backend shares (checks, bindings, packing).
// The kernels' JIT'd code calls malloc for its tile buffers, which is not counted: it is the
// kernel's work, not the launch's. Not built with sanitizers (they replace operator new).
#include <kiln/kiln.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};

void* allocate(std::size_t n, std::size_t align) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  if (n == 0) n = 1;
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align) : std::malloc(n);
  if (!p) throw std::bad_alloc();
  return p;
}
} // namespace

void* operator new(std::size_t n) { return allocate(n, 0); }
void* operator new[](std::size_t n) { return allocate(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return allocate(n, std::size_t(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return allocate(n, std::size_t(a)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n, 0);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

struct Case {
  const char* kernel;
  std::vector<int64_t> shape;
  kiln::DType dtype;
};

/// 100 launches of each case on `rt`'s default stream, counted; the failures.
int countLaunches(kiln::Runtime& rt, const std::vector<Case>& cases) {
  int failures = 0;
  for (const Case& c : cases) {
    const kiln::catalogue::Entry& e = kiln::catalogue::find(c.kernel);
    kiln::CompiledKernel ck = rt.compile(kiln::catalogue::kernel_for(e, c.dtype, c.shape));
    kiln::catalogue::Problem p = e.problem(c.shape, c.dtype, 3);
    kiln::catalogue::DeviceProblem d = kiln::catalogue::upload(rt, p);
    ck.launch(d.views); // the first launch may set things up (a twin's choice, its tensor maps)
    counting = true;
    for (int i = 0; i < 100; ++i) ck.launch(d.views, nullptr);
    counting = false;
    const long n = allocations.exchange(0);
    rt.synchronize();
    const bool ok = kiln::catalogue::verify_output(rt, d, p).ok;
    std::string shape;
    for (int64_t x : c.shape) shape += (shape.empty() ? "" : "x") + std::to_string(x);
    std::printf("%-5s %-16s %-5s %-12s 100 launches: %ld allocations%s (%s)\n", kiln::to_string(rt.backend()), c.kernel,
                kiln::to_string(c.dtype), shape.c_str(), n, ok ? "" : ", WRONG OUTPUT", ck.launch_path(d.views).c_str());
    if (n != 0 || !ok) ++failures;
  }
  return failures;
}

int main() try {
  kiln::Runtime rt = kiln::Runtime::create(kiln::Backend::cpu, kiln::RuntimeOptions{.cache_dir = "off"});
  int failures = countLaunches(rt, {{"add", {8, 8}, kiln::DType::f32}, {"gemm_bias_relu", {64, 48, 32}, kiln::DType::bf16},
                                    {"softmax", {4, 100}, kiln::DType::f32}, {"rmsnorm", {3, 64}, kiln::DType::bf16}});
  // On a GPU, the same through the CUDA backend: the portable kernel and (sm_90a) a twin.
  kiln::Runtime gpu = kiln::Runtime::create(kiln::Backend::automatic, kiln::RuntimeOptions{.cache_dir = "off"});
  if (gpu.backend() == kiln::Backend::cuda)
    failures += countLaunches(gpu, {{"add", {8, 8}, kiln::DType::f32},
                                    {"gemm_bias_relu", {256, 256, 512}, kiln::DType::bf16},
                                    {"gemm_bias_relu", {257, 135, 65}, kiln::DType::bf16}});
  else
    std::printf("cuda: not run here: %s\n", gpu.describe().c_str());
  if (failures) std::printf("FAIL: %d kernel(s) allocated while launching, or computed wrong\n", failures);
  else std::printf("ok: launches allocate nothing\n");
  return failures ? 1 : 0;
} catch (const kiln::Error& e) {
  std::printf("FAIL: %s\n", e.what());
  return 1;
}
