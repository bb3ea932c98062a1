// Hand-written CUDA C++ on the device (kiln/handwritten.hpp): the catalogue's NVRTC GEMMs
// against the Eigen f64 reference on ragged shapes, and the launch checks.
#include <catch2/catch.hpp>

#include "kiln/catalogue.hpp"
#include "kiln/error.hpp"
#include "kiln/handwritten.hpp"
#include "kiln/reference.hpp"
#include "kiln/runtime.hpp"
#include "gpu_test.hpp"

using namespace kiln;
using kiln::gputest::gpu;
using kiln::gputest::str;
using Catch::Matchers::Contains;

namespace {

CudaSource scale() {
  CudaSource s;
  s.name = "scale.cu";
  s.entry = "scale";
  s.code = R"(extern "C" __global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
})";
  return s;
}

} // namespace

TEST_CASE("the hand-written GEMMs agree with the reference on ragged shapes", "[gpu][handwritten]") {
  for (const char* name : {"gemm", "gemm_bias_relu", "gemm_bias_gelu"}) {
    const catalogue::Entry& e = catalogue::find(name);
    for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
      catalogue::Handwritten h = e.handwritten(dt);
      HandwrittenKernel k = compile_cuda(gpu(), h.source);
      CHECK(k.report().registers > 0);
      CHECK(k.times().load_ms > 0);
      uint64_t seed = 500;
      for (std::vector<int64_t> s : {std::vector<int64_t>{1, 1, 1}, {129, 127, 65}, {257, 1000, 33}, {1000, 9, 1000},
                                     {4097, 65, 129}, {64, 4097, 40}}) {
        catalogue::Problem p = e.problem(s, dt, seed++);
        catalogue::DeviceProblem d = catalogue::upload(gpu(), p);
        h.launch(k, d.views, nullptr);
        verify::Report r = catalogue::verify_output(gpu(), d, p);
        INFO(name << " " << to_string(dt) << " " << s[0] << "x" << s[1] << "x" << s[2] << ": " << r.summary());
        CHECK(r.ok);
      }
    }
  }
}

TEST_CASE("a hand-written kernel runs with checked arguments", "[gpu][handwritten]") {
  HandwrittenKernel k = compile_cuda(gpu(), scale());
  HostTensor x(DType::f32, {1000});
  for (int i = 0; i < 1000; ++i) x.set(i, i);
  DeviceTensor dx = gpu().upload(x);
  k.launch({4, 1, 1}, {256, 1, 1}, 0, {dx, 2.0f, int32_t(1000)});
  gpu().synchronize();
  gpu().download(dx, x);
  CHECK(x.get(999) == 1998);

  CHECK_THROWS_WITH(k.launch({4, 1, 1}, {256, 1, 1}, 0, {dx, 2.0f}),
                    Contains("takes 3 parameters, got 2 arguments"));
  CHECK_THROWS_WITH(k.launch({4, 1, 1}, {256, 1, 1}, 0, {dx, 2.0, int32_t(1000)}),
                    Contains("parameter 1 is 4 bytes") && Contains("8-byte scalar"));
  float host[4] = {};
  CHECK_THROWS_WITH(k.launch({1, 1, 1}, {4, 1, 1}, 0, {TensorView{host, DType::f32, {4}, {}}, 2.0f, int32_t(4)}),
                    Contains("argument 0") && Contains("not memory of CUDA device"));
  CHECK_THROWS_WITH(k.launch({1, 1, 1}, {2048, 1, 1}, 0, {dx, 2.0f, int32_t(1000)}), Contains("allows 1 to"));
  CHECK_THROWS_WITH(k.launch({1, 1, 1}, {32, 1, 1}, size_t(1) << 30, {dx, 2.0f, int32_t(1000)}),
                    Contains("dynamic shared memory"));
  // Nothing above ran: the data is as the first launch left it.
  gpu().download(dx, x);
  CHECK(x.get(999) == 1998);
}

TEST_CASE("the eager framework path (cuBLASLt GEMM, then the elementwise epilogue) agrees with the reference",
          "[gpu][handwritten]") {
  struct Case { const char* kernel; reference::Epilogue fused; catalogue::Activation act; };
  for (Case cs : {Case{"gemm_bias_relu", reference::Epilogue::bias_relu, catalogue::Activation::relu},
                  Case{"gemm_bias_gelu", reference::Epilogue::bias_gelu, catalogue::Activation::gelu},
                  Case{"gemm_bias_residual", reference::Epilogue::bias, catalogue::Activation::none}}) {
    const catalogue::Entry& e = catalogue::find(cs.kernel);
    for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
      catalogue::EagerEpilogue ee = catalogue::eager_epilogue(dt);
      HandwrittenKernel k = compile_cuda(gpu(), ee.source);
      uint64_t seed = 700;
      // 70000 rows: more than a grid's 65535 in y, so rows are strided.
      for (std::vector<int64_t> s : {std::vector<int64_t>{1, 1, 1}, {129, 300, 65}, {70000, 3, 8}}) {
        catalogue::Problem p = e.problem(s, dt, seed++);
        catalogue::DeviceProblem d = catalogue::upload(gpu(), p);
        const auto& v = d.views;
        const TensorView* residual = cs.fused == reference::Epilogue::bias ? &v[3] : nullptr;
        reference::gpu_gemm_async(gpu(), v[0], v[1], nullptr, reference::Epilogue::none, v[p.output], nullptr, nullptr);
        ee.launch(k, v[p.output], &v[2], residual, cs.act, nullptr);
        gpu().synchronize();
        verify::Report r = catalogue::verify_output(gpu(), d, p);
        INFO(cs.kernel << " " << to_string(dt) << " " << s[0] << "x" << s[1] << "x" << s[2] << ": " << r.summary());
        CHECK(r.ok);
      }
    }
  }
}
