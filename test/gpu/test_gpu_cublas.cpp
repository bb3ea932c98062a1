// The GPU reference: cuBLASLt (reference::gpu_gemm) on the same device inputs as kiln's
// GEMM kernels. cuBLASLt must agree with the Eigen f64 reference, and kiln must agree with
// cuBLASLt, both under the output dtype's tolerance (docs/verifier.md).
#include <catch2/catch.hpp>

#include <cmath>

#include "kiln/catalogue.hpp"
#include "kiln/error.hpp"
#include "kiln/reference.hpp"
#include "kiln/runtime.hpp"
#include "gpu_test.hpp"

using namespace kiln;
using kiln::gputest::gpu;
using kiln::gputest::str;
using Catch::Matchers::Contains;

namespace {

// M x N x K; none a multiple of kiln's 64x64x32 tiles, nor of cuBLASLt's.
const std::vector<std::vector<int64_t>> kShapes = {
    {1, 1, 1}, {129, 127, 65}, {4097, 65, 129}, {257, 4097, 33}, {65, 33, 4097}};


void checkAgainstCublas(const std::string& name, reference::Epilogue epi) {
  const catalogue::Entry& e = catalogue::find(name);
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    CompiledKernel ck = gpu().compile(e.make(dt));
    const verify::Tolerance tol = verify::Tolerance::for_dtype(dt);
    uint64_t seed = 300;
    for (const auto& s : kShapes) {
      catalogue::Problem p = e.problem(s, dt, seed++); // kiln's output arrives poisoned
      catalogue::DeviceProblem d = catalogue::upload(gpu(), p);
      const std::vector<TensorView>& views = d.views;
      HostTensor cublas(dt, p.args[p.output].dims());
      cublas.poison();
      DeviceTensor dcublas = gpu().upload(cublas);

      ck.launch(views);
      const TensorView* bias = epi == reference::Epilogue::none ? nullptr : &views[2];
      const TensorView* residual = epi == reference::Epilogue::bias ? &views[3] : nullptr;
      reference::gpu_gemm(gpu(), views[0], views[1], bias, epi, dcublas.view(), residual);
      gpu().download(d.tensors[p.output], p.args[p.output]);
      gpu().download(dcublas, cublas);

      const verify::Report cublasVsEigen = verify::compare(cublas.view(), p.reference, tol);
      const verify::Report kilnVsCublas = verify::compare(p.args[p.output].view(), cublas.to_f64(), tol);
      INFO(name << " " << to_string(dt) << " " << str(s) << "\n  cuBLASLt vs Eigen f64: "
                << cublasVsEigen.summary() << "\n  kiln vs cuBLASLt: " << kilnVsCublas.summary());
      CHECK(cublasVsEigen.ok);
      CHECK(kilnVsCublas.ok);
    }
  }
}

template <typename Fn> void requireError(Fn fn, ErrorKind kind, const std::string& needle) {
  try {
    fn();
    FAIL("expected kiln::Error");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.kind() == kind);
    CHECK_THAT(std::string(e.what()), Contains(needle));
  }
}

} // namespace

TEST_CASE("gpu: cuBLASLt agrees with Eigen and kiln's gemm agrees with cuBLASLt in f32, bf16 and f16",
          "[gpu][cublas]") {
  checkAgainstCublas("gemm", reference::Epilogue::none);
}

TEST_CASE("gpu: cuBLASLt's bias+ReLU epilogue agrees with Eigen and kiln's gemm_bias_relu agrees with it",
          "[gpu][cublas]") {
  checkAgainstCublas("gemm_bias_relu", reference::Epilogue::bias_relu);
}

TEST_CASE("gpu: cuBLASLt's bias+GELU epilogue agrees with Eigen and kiln's gemm_bias_gelu agrees with it",
          "[gpu][cublas]") {
  checkAgainstCublas("gemm_bias_gelu", reference::Epilogue::bias_gelu);
}

TEST_CASE("gpu: cuBLASLt's bias epilogue with a residual agrees with Eigen and kiln's gemm_bias_residual agrees with it",
          "[gpu][cublas]") {
  checkAgainstCublas("gemm_bias_residual", reference::Epilogue::bias);
}

TEST_CASE("gpu: gpu_gemm reads and writes through row strides and leaves the gaps alone", "[gpu][cublas]") {
  const int64_t M = 70, N = 45, K = 33, padA = 5, padB = 3, padC = 7;
  const DType dt = DType::bf16;
  HostTensor a(dt, {M, K + padA}), b(dt, {K, N + padB}), bias(dt, {N}), c(dt, {M, N + padC});
  a.fill_random(11);
  b.fill_random(12);
  bias.fill_random(13);
  c.poison();
  DeviceTensor da = gpu().upload(a), db = gpu().upload(b), dbias = gpu().upload(bias), dc = gpu().upload(c);
  auto sub = [](TensorView v, int64_t rows, int64_t cols) {
    const int64_t ld = v.dims[1];
    v.dims = {rows, cols};
    v.strides = {ld, 1};
    return v;
  };
  const TensorView bv = dbias.view();
  reference::gpu_gemm(gpu(), sub(da.view(), M, K), sub(db.view(), K, N), &bv, reference::Epilogue::bias_gelu,
                      sub(dc.view(), M, N));
  gpu().download(dc, c);
  const TensorView hbias = bias.view();
  const auto ref = reference::gemm(sub(a.view(), M, K), sub(b.view(), K, N), &hbias, reference::Epilogue::bias_gelu);
  const verify::Report r = verify::compare(sub(c.view(), M, N), ref, verify::Tolerance::for_dtype(dt));
  INFO(r.summary());
  CHECK(r.ok);
  int64_t gapWritten = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = N; j < N + padC; ++j) gapWritten += std::isnan(c.get(i * (N + padC) + j)) ? 0 : 1;
  CHECK(gapWritten == 0);
}

TEST_CASE("gpu: gpu_gemm with K = 0 writes the epilogue of the bias", "[gpu][cublas]") {
  const int64_t M = 5, N = 9;
  HostTensor bias(DType::f32, {N}), c(DType::f32, {M, N});
  bias.fill_random(21);
  c.poison();
  DeviceTensor da = gpu().allocate(DType::f32, {M, 0}), db = gpu().allocate(DType::f32, {0, N}),
               dbias = gpu().upload(bias), dc = gpu().upload(c);
  const TensorView bv = dbias.view();
  reference::gpu_gemm(gpu(), da.view(), db.view(), &bv, reference::Epilogue::bias_relu, dc.view());
  gpu().download(dc, c);
  HostTensor ha(DType::f32, {M, 0}), hb(DType::f32, {0, N});
  const TensorView hbias = bias.view();
  const auto ref = reference::gemm(ha.view(), hb.view(), &hbias, reference::Epilogue::bias_relu);
  const verify::Report r = verify::compare(c.view(), ref, verify::Tolerance::for_dtype(DType::f32));
  INFO(r.summary());
  CHECK(r.ok);
}

TEST_CASE("gpu: gpu_gemm refuses a host pointer, naming the argument", "[gpu][cublas][errors]") {
  HostTensor hb(DType::f32, {4, 3});
  DeviceTensor a = gpu().allocate(DType::f32, {2, 4}), c = gpu().allocate(DType::f32, {2, 3});
  requireError([&] { reference::gpu_gemm(gpu(), a.view(), hb.view(), nullptr, reference::Epilogue::none, c.view()); },
               ErrorKind::InvalidArgument, "argument 'B' is not memory of CUDA device");
}

TEST_CASE("gpu: gpu_gemm refuses a transposed operand, naming it", "[gpu][cublas][errors]") {
  DeviceTensor a = gpu().allocate(DType::f16, {2, 4}), bt = gpu().allocate(DType::f16, {3, 4}),
               c = gpu().allocate(DType::f16, {2, 3});
  TensorView b{bt.view().data, DType::f16, {4, 3}, {1, 4}};
  requireError([&] { reference::gpu_gemm(gpu(), a.view(), b, nullptr, reference::Epilogue::none, c.view()); },
               ErrorKind::InvalidArgument, "B must have inner stride 1");
}

TEST_CASE("gpu: gpu_gemm on a CPU runtime throws Unsupported", "[gpu][cublas][errors]") {
  Runtime cpu = Runtime::create(Backend::cpu);
  HostTensor a(DType::f32, {2, 4}), b(DType::f32, {4, 3}), c(DType::f32, {2, 3});
  requireError([&] { reference::gpu_gemm(cpu, a.view(), b.view(), nullptr, reference::Epilogue::none, c.view()); },
               ErrorKind::Unsupported, "reference::gpu_gemm runs cuBLASLt on a CUDA runtime");
}
