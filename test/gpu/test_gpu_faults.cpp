// Out of device memory: an engine that holds most of the GPU's memory (here: kiln's own
// allocations, as a hoard) must get clear errors from kiln, never a crash or a wrong
// answer, and kiln must work again once memory is free.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "kiln/catalogue.hpp"
#include "kiln/error.hpp"
#include "kiln/runtime.hpp"
#include "gpu_test.hpp"

using namespace kiln;
using kiln::gputest::gpu;
using Catch::Matchers::Contains;

namespace {

// Allocates chunks of `bytes` until the device refuses one, keeping them in `held`.
void hoard(std::vector<DeviceTensor>& held, int64_t bytes) {
  for (;;) {
    try {
      held.push_back(gpu().allocate(DType::f32, {bytes / 4}));
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Runtime);
      CHECK_THAT(std::string(e.what()), Contains("CUDA_ERROR_OUT_OF_MEMORY"));
      return;
    }
  }
}

} // namespace

TEST_CASE("gpu: a tensor larger than the device's memory is a Runtime error naming the bytes", "[gpu][faults]") {
  const int64_t tib = int64_t(1) << 40; // more than any GPU here has
  try {
    gpu().allocate(DType::f32, {tib / 4});
    FAIL("a 1 TiB tensor should not fit");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Runtime);
    CHECK_THAT(std::string(e.what()), Contains("allocating " + std::to_string(tib) + " bytes of device memory") &&
                                          Contains("CUDA_ERROR_OUT_OF_MEMORY"));
  }
  auto r = catalogue::run_and_verify(gpu(), catalogue::find("gemm_bias_relu"), {129, 65, 33}, DType::bf16, 3);
  CHECK(r.report.ok); // not a sticky error: the runtime carries on
}

TEST_CASE("gpu: with the device's memory exhausted, kiln's calls fail with errors and work again once it is freed",
          "[gpu][faults]") {
  // Compiled beforehand, so what runs out below is memory, not the compile.
  CompiledKernel ck = gpu().compile(catalogue::gemm_bias_relu(DType::bf16));
  std::vector<DeviceTensor> held;
  for (int64_t chunk : {int64_t(4) << 30, int64_t(256) << 20, int64_t(16) << 20, int64_t(1) << 20}) hoard(held, chunk);
  REQUIRE(held.size() > 1);
  INFO(held.size() << " buffers held");
  // Whatever needs device memory now either fits in what is left or is a kiln::Error, never
  // a crash, an abort or an unverified result.
  int errors = 0;
  auto attempt = [&](const char* what, auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      ++errors;
      INFO(what << ": " << e.what());
      CHECK((e.kind() == ErrorKind::Runtime || e.kind() == ErrorKind::CompileFailed));
      CHECK_THAT(std::string(e.what()), Contains("OUT_OF_MEMORY") || Contains("out of memory"));
    }
  };
  attempt("a new problem's tensors", [&] {
    auto r = catalogue::run_and_verify(gpu(), catalogue::find("gemm_bias_relu"), {1000, 1000, 1000}, DType::bf16, 5);
    CHECK(r.report.ok);
  });
  attempt("a new kernel's module", [&] { gpu().compile(catalogue::softmax(DType::f16)); });
  CHECK(errors >= 1); // the first needs 6 MB it could not have had
  held.clear();
  // Memory back: the same calls run and verify.
  auto r = catalogue::run_and_verify(gpu(), catalogue::find("gemm_bias_relu"), {1000, 1000, 1000}, DType::bf16, 5);
  CHECK(r.report.ok);
  auto s = catalogue::run_and_verify(gpu(), catalogue::find("softmax"), {7, 3000}, DType::f16, 5);
  CHECK(s.report.ok);
  (void)ck;
}
