// A kernel that faults (here: a hand-written one that traps, on a stream of the engine's
// own) leaves the CUDA context unusable. kiln must say so clearly, refuse a new Runtime on
// that context unless asked to reset it, reset it where the driver allows, and otherwise say the process must restart —
// while the automatic backend falls back to the CPU, so the process can still compute.
// Hidden tag: it breaks the device's primary context, so it runs in a process of its own
// (scripts/device-run.sh runs `kiln-gpu-tests "[sticky]"` after the main suite).
#include <catch2/catch.hpp>

#include "kiln/catalogue.hpp"
#include "kiln/error.hpp"
#include "kiln/handwritten.hpp"
#include "kiln/runtime.hpp"

#include "Driver.h" // the engine's own stream

using namespace kiln;
using Catch::Matchers::Contains;

TEST_CASE("gpu: after a kernel faults, kiln says so and the process carries on", "[.sticky][gpu]") {
  {
    // The fault comes from the engine's own kernel (here one that traps): kiln's launch checks
    // keep its own kernels inside their arguments' allocations, but share the context.
    Runtime broken = Runtime::create(Backend::cuda);
    CompiledKernel add = broken.compile(catalogue::add(DType::f32));
    CudaSource trap;
    trap.name = "trap.cu";
    trap.entry = "trap";
    trap.code = R"(extern "C" __global__ void trap(float* x) { x[threadIdx.x] = 1.0f; __trap(); })";
    HandwrittenKernel faulty = compile_cuda(broken, trap);
    DeviceTensor x = broken.allocate(DType::f32, {1, 32});
    // On the engine's own stream (made with the driver API, as an engine would), not kiln's:
    // the engine sees the fault there first; kiln learns of it on its next call.
    cuda::Stream engine(CU_STREAM_NON_BLOCKING);
    faulty.launch({1, 1, 1}, {32, 1, 1}, 0, {x}, engine.get());
    CHECK(cuda::driver().cuStreamSynchronize(engine.get()) != CUDA_SUCCESS);
    // kiln's own kernel on that context: refused with the reason, never silently skipped.
    try {
      add.launch({x.view(), x.view(), x.view()});
      FAIL("a launch on the faulted context should report an error");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Runtime);
      CHECK_THAT(std::string(e.what()), Contains("kernel 'add'"));
      CHECK_THAT(std::string(e.what()), Contains("unusable"));
    }
    try {
      broken.synchronize();
      FAIL("the fault should be reported when the runtime synchronizes");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Runtime);
      CHECK_THAT(std::string(e.what()), Contains("unusable"));
    }
  } // the broken runtime's kernels and buffers go away here (their frees only log)

  // kiln never resets a context it shares with the engine unless asked to.
  try {
    Runtime::create(Backend::cuda);
    FAIL("a runtime on the faulted context should be refused");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Runtime);
    CHECK_THAT(std::string(e.what()), Contains("restart the process"));
    CHECK_THAT(std::string(e.what()), Contains("reset_after_fault"));
  }
  bool fresh = false;
  try {
    Runtime rt = Runtime::create(Backend::cuda, {.reset_after_fault = true});
    auto r = catalogue::run_and_verify(rt, catalogue::find("gemm_bias_relu"), {129, 65, 33}, DType::bf16, 3);
    INFO(r.report.summary());
    CHECK(r.report.ok);
    fresh = true;
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Runtime);
    CHECK_THAT(std::string(e.what()), Contains("restart the process"));
  }
  WARN((fresh ? "the driver reset the context: the GPU carried on"
              : "the driver refused a reset: the GPU needs a new process"));
  // Either way the process can still compute: auto picks the CPU when CUDA cannot start.
  Runtime any = Runtime::create(Backend::automatic);
  auto r = catalogue::run_and_verify(any, catalogue::find("add"), {7, 300}, DType::f32, 4);
  CHECK(r.report.ok);
  if (!fresh) CHECK_THAT(any.describe(), Contains("restart the process"));
}
