// Every catalogue kernel on the GPU, in f32, bf16 and f16, on ragged shapes, against the
// Eigen f64 reference, with the output poisoned (NaN) before each run.
#include <catch2/catch.hpp>

#include <cmath>

#include <algorithm>
#include <functional>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>

#include "kiln/catalogue.hpp"
#include "kiln/dsl.hpp"
#include "kiln/error.hpp"
#include "kiln/handwritten.hpp"
#include "kiln/profile.hpp"
#include "kiln/reference.hpp"
#include "kiln/runtime.hpp"
#include "gpu_test.hpp"
#include "../scoped_env.hpp"
#include "../unit/dsl_attention.hpp"
#include "../unit/dsl_gemms.hpp"
#include "../unit/unary_ops.hpp"
#include "../random_programs.hpp"

#include "Driver.h" // an engine's own stream, for the caller-stream test

#include <limits>

using namespace kiln;
using kiln::gputest::gpu;
using kiln::testing::ScopedEnv;
using kiln::gputest::str;
using Catch::Matchers::Contains;
namespace random_programs = kiln::testing::random_programs;

namespace {

// 1, 7, 127, 129, 1000 and 4097 as M, N and K; none a multiple of the 64x64x32 tiles.
// The last four have K and N multiples of 8, so bf16/f16 runs take the pipelined
// cp.async k-loop (fewer iterations than stages included); the others take the plain loop.
const std::vector<std::vector<int64_t>> kGemmShapes = {
    {1, 1, 1},     {7, 127, 129},  {129, 7, 1000}, {127, 1000, 7}, {1000, 129, 127},
    {4097, 65, 33}, {33, 4097, 65}, {65, 33, 4097}, {257, 129, 65},
    {129, 64, 16}, {1000, 1000, 1000}, {65, 40, 4096}, {3, 8, 8}};
const std::vector<std::vector<int64_t>> kRowShapes = {
    {1, 1}, {7, 1000}, {129, 127}, {1000, 129}, {4097, 7}, {3, 4097}, {5, 257}};
// B x H x G x S x D: each head dim the catalogue builds, GQA 4:1 and 2:1, S ragged past
// several key tiles, one row; the last is sampled against the reference, not checked whole.
const std::vector<std::vector<int64_t>> kAttentionShapes = {
    {1, 1, 1, 1, 64},   {2, 4, 2, 77, 64},   {1, 2, 2, 129, 128},  {2, 8, 2, 200, 32},
    {1, 4, 1, 1000, 128}, {3, 2, 2, 513, 64}, {1, 8, 2, 8200, 128}};
// B x H x G x T x S x D: one new query against caches ragged past one and many key tiles,
// GQA 4:1, five and eight queries, T = S, and a long cache (sampled).
const std::vector<std::vector<int64_t>> kDecodeShapes = {
    {1, 1, 1, 1, 1, 64},     {2, 8, 2, 1, 77, 128},  {1, 4, 1, 5, 1000, 128}, {3, 2, 2, 8, 513, 64},
    {1, 2, 2, 130, 130, 32}, {1, 32, 8, 1, 20000, 128}, {2, 4, 4, 3, 9000, 64}};


// T x H x D: RoPE over one token and head, heads past a program's 8, head dims 64 and 128.
const std::vector<std::vector<int64_t>> kRopeShapes = {{1, 1, 64}, {7, 3, 128}, {33, 9, 64}, {300, 40, 128}};

verify::Report runOnGpu(const CompiledKernel& ck, catalogue::Problem& p) {
  catalogue::DeviceProblem d = catalogue::upload(gpu(), p); // the output arrives poisoned
  ck.launch(d.views);
  return catalogue::verify_output(gpu(), d, p);
}

void checkOnShapes(const std::string& name) {
  const catalogue::Entry& e = catalogue::find(name);
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    CompiledKernel one = gpu().compile(e.make(dt)); // one compile serves every shape...
    uint64_t seed = 100;
    for (const auto& s : e.name == "rope"     ? kRopeShapes
                         : e.shape_rank == 6 ? kDecodeShapes
                         : e.shape_rank == 5 ? kAttentionShapes
                         : e.shape_rank == 3 ? kGemmShapes
                                             : kRowShapes) {
      // ...but attention's, built per head dim (the runtime's cache serves repeats)
      std::optional<CompiledKernel> own;
      if (e.make_for_shape) own.emplace(gpu().compile(catalogue::kernel_for(e, dt, s, gpu().fingerprint().target)));
      const CompiledKernel& ck = own ? *own : one;
      catalogue::Problem p = e.problem(s, dt, seed++);
      verify::Report r = runOnGpu(ck, p);
      INFO(name << " " << to_string(dt) << " " << str(s) << ": " << r.summary() << " [" << ck.report().str() << "]");
      CHECK(r.ok);
    }
  }
}

} // namespace

TEST_CASE("gpu: gemm is correct on ragged shapes in f32, bf16 and f16", "[gpu]") { checkOnShapes("gemm"); }
TEST_CASE("gpu: gemm_bias_relu is correct on ragged shapes in f32, bf16 and f16", "[gpu]") { checkOnShapes("gemm_bias_relu"); }
TEST_CASE("gpu: gemm_bias_gelu is correct on ragged shapes in f32, bf16 and f16", "[gpu]") { checkOnShapes("gemm_bias_gelu"); }
TEST_CASE("gpu: gemm_bias_residual is correct on ragged shapes in f32, bf16 and f16", "[gpu]") { checkOnShapes("gemm_bias_residual"); }
TEST_CASE("gpu: softmax is correct on ragged shapes in f32, bf16 and f16", "[gpu]") { checkOnShapes("softmax"); }
TEST_CASE("gpu: add is correct on ragged shapes in f32, bf16 and f16", "[gpu]") { checkOnShapes("add"); }
TEST_CASE("gpu: the catalogue's attention is correct on ragged shapes, head dims and head groups", "[gpu]") {
  checkOnShapes("attention");
}
TEST_CASE("gpu: the catalogue's causal attention is correct on ragged shapes, head dims and head groups", "[gpu]") {
  checkOnShapes("attention_causal");
}
TEST_CASE("gpu: attention over a K/V cache (decode) is correct on ragged caches, query counts and head groups", "[gpu]") {
  checkOnShapes("attention_decode");
}
TEST_CASE("gpu: rmsnorm is correct on ragged shapes in f32, bf16 and f16", "[gpu]") { checkOnShapes("rmsnorm"); }
TEST_CASE("gpu: swiglu is correct on ragged shapes in f32, bf16 and f16", "[gpu]") { checkOnShapes("swiglu"); }
TEST_CASE("gpu: rope is correct on ragged shapes in f32, bf16 and f16", "[gpu]") { checkOnShapes("rope"); }
TEST_CASE("gpu: the catalogue's padded and packed attention is correct on ragged lengths, head dims and head groups", "[gpu]") {
  checkOnShapes("attention_padded");
  checkOnShapes("attention_padded_causal");
  checkOnShapes("attention_packed");
  checkOnShapes("attention_packed_causal");
}

TEST_CASE("gpu: tile configurations and warp counts give the same answers", "[gpu]") {
  for (int warps : {1, 2, 8}) {
    Runtime rt = Runtime::create(Backend::cuda, {.num_warps = warps});
    for (catalogue::GemmTiles t : {catalogue::GemmTiles{16, 8, 4, 1}, catalogue::GemmTiles{3, 5, 7, 2},
                                   catalogue::GemmTiles{128, 64, 16, 4}}) {
      CompiledKernel ck = rt.compile(catalogue::gemm_bias_gelu(DType::bf16, t));
      catalogue::Problem p = catalogue::find("gemm_bias_gelu").problem({131, 77, 45}, DType::bf16, 5);
      catalogue::DeviceProblem d = catalogue::upload(rt, p);
      const std::vector<TensorView>& v = d.views;
      ck.launch(v);
      auto r = catalogue::verify_output(rt, d, p);
      INFO(warps << " warps, tiles " << t.m << "x" << t.n << "x" << t.k << ": " << r.summary());
      CHECK(r.ok);
    }
  }
}

TEST_CASE("gpu: the pipelined k-loop is right for every warp count and stage depth", "[gpu]") {
  for (int warps : {1, 2, 4, 8}) {
    Runtime rt = Runtime::create(Backend::cuda, {.num_warps = warps});
    for (int64_t stages : {2, 3, 5}) {
      for (DType dt : {DType::bf16, DType::f16}) {
        CompiledKernel ck = rt.compile(catalogue::gemm_bias_relu(dt, {.m = 64, .n = 64, .k = 32, .stages = stages}));
        for (const std::vector<int64_t>& s : {std::vector<int64_t>{70, 72, 32}, {129, 136, 1000}, {64, 64, 96}}) {
          catalogue::Problem p = catalogue::find("gemm_bias_relu").problem(s, dt, stages * 10 + warps);
          catalogue::DeviceProblem d = catalogue::upload(rt, p);
          const std::vector<TensorView>& v = d.views;
          ck.launch(v);
          auto r = catalogue::verify_output(rt, d, p);
          INFO(warps << " warps, " << stages << " stages, " << to_string(dt) << " " << str(s) << ": " << r.summary());
          CHECK(r.ok);
        }
      }
    }
  }
}

TEST_CASE("gpu: cp.async zero-fills the part of a vector past a padded row's end", "[gpu]") {
  // K = 1001 with a leading dimension of 1008: rows are 16-byte aligned, so the pipelined
  // path runs, and the last vector of each row holds 1 valid element and 7 of padding
  // that must read as zero (the buffer there holds NaN).
  const int64_t M = 96, N = 80, K = 1001, ld = 1008;
  HostTensor a(DType::bf16, {M, ld}), b(DType::bf16, {K, N}), bias(DType::bf16, {N}), c(DType::bf16, {M, N});
  a.fill_random(1);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = K; k < ld; ++k) a.set(i * ld + k, std::numeric_limits<float>::quiet_NaN());
  b.fill_random(2);
  bias.fill_random(3);
  c.poison();
  DeviceTensor da = gpu().upload(a), db = gpu().upload(b), dbias = gpu().upload(bias), dc = gpu().upload(c);
  TensorView av{da.view().data, DType::bf16, {M, K}, {ld, 1}};
  gpu().compile(catalogue::gemm_bias_relu(DType::bf16)).launch({av, db.view(), dbias.view(), dc.view()});
  gpu().download(dc, c);
  TensorView hv{a.data(), DType::bf16, {M, K}, {ld, 1}};
  TensorView hbias = bias.view();
  auto r = verify::compare(c.view(), reference::gemm(hv, b.view(), &hbias, reference::Epilogue::bias_relu),
                           verify::Tolerance::for_dtype(DType::bf16));
  INFO(r.summary());
  CHECK(r.ok);
}

TEST_CASE("gpu: strided device inputs are read through their strides", "[gpu]") {
  const int64_t M = 70, N = 45, K = 33;
  HostTensor a(DType::f32, {M, K}), bt(DType::f32, {N, K}), c(DType::f32, {M, N});
  a.fill_random(1);
  bt.fill_random(2);
  c.poison();
  DeviceTensor da = gpu().upload(a), dbt = gpu().upload(bt), dc = gpu().upload(c);
  TensorView b{dbt.view().data, DType::f32, {K, N}, {1, K}}; // B = transpose of a row-major N x K
  gpu().compile(catalogue::gemm(DType::f32)).launch({da.view(), b, dc.view()});
  gpu().download(dc, c);
  TensorView hb{bt.data(), DType::f32, {K, N}, {1, K}};
  auto r = verify::compare(c.view(), reference::gemm(a.view(), hb, nullptr, reference::Epilogue::none),
                           verify::Tolerance::for_dtype(DType::f32));
  INFO(r.summary());
  CHECK(r.ok);
}

TEST_CASE("gpu: the kernel report comes from the loaded cubin", "[gpu]") {
  CompiledKernel ck = gpu().compile(catalogue::gemm_bias_relu(DType::bf16));
  CHECK(ck.report().registers > 0);
  CHECK(ck.report().spill_bytes == 0);
  CHECK(ck.times().load_ms > 0);
  CHECK(ck.backend() == Backend::cuda);
}

TEST_CASE("gpu: a compile whose machine code the driver's JIT cache held says so", "[gpu]") {
  // Two fresh runtimes without kiln's cache compile the same kernel: the second time the
  // driver's JIT (which builds modules with an sm_90a twin where asked to, not ptxas) finds
  // the machine code in its own disk cache, unless CUDA_CACHE_DISABLE=1 turned that cache off.
  ScopedEnv jit("KILN_HOPPER_JIT", "driver");
  Runtime first = Runtime::create(Backend::cuda, {.cache_dir = "off"});
  if (first.fingerprint().target != "sm_90a") {
    WARN("not run: the driver's JIT builds kiln's modules only for sm_90a twins, and this GPU is "
         << first.fingerprint().target);
    return;
  }
  const char* disabled = std::getenv("CUDA_CACHE_DISABLE");
  const bool off = disabled && std::string(disabled) == "1";
  (void)first.compile(catalogue::gemm_bias_relu(DType::bf16));
  Runtime second = Runtime::create(Backend::cuda, {.cache_dir = "off"});
  CompiledKernel again = second.compile(catalogue::gemm_bias_relu(DType::bf16));
  INFO(again.report().compiler);
  REQUIRE_THAT(again.report().compiler, Contains("CUDA driver PTX JIT"));
  if (off) CHECK_THAT(again.report().compiler, !Contains("driver's JIT cache"));
  else CHECK_THAT(again.report().compiler, Contains("machine code from the driver's JIT cache"));
}

TEST_CASE("gpu: a host pointer passed as a device tensor is refused, naming the argument", "[gpu][errors]") {
  CompiledKernel ck = gpu().compile(catalogue::add(DType::f32));
  HostTensor x(DType::f32, {8, 8});
  DeviceTensor dx = gpu().upload(x), dz = gpu().upload(x);
  try {
    ck.launch({dx.view(), x.view(), dz.view()});
    FAIL("a host pointer must be refused");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidArgument);
    CHECK_THAT(std::string(e.what()), Contains("argument 'Y' is not memory of CUDA device"));
  }
}

TEST_CASE("gpu: a view claiming more memory than its allocation is refused, naming the argument", "[gpu][errors]") {
  // Launch checks see allocation sizes: a view past its allocation would fault the kernel,
  // and a fault leaves the engine's whole CUDA context unusable.
  CompiledKernel ck = gpu().compile(catalogue::gemm(DType::f32));
  HostTensor x(DType::f32, {8, 8});
  for (int i = 0; i < 64; ++i) x.set(i, float(i % 7));
  std::vector<DeviceTensor> bufs;
  for (int i = 0; i < 3; ++i) bufs.push_back(gpu().upload(x));
  // B claims ~2 TiB (row stride 2^36) from the highest of the three addresses, so it overlaps
  // neither A nor C (outputs must not overlap inputs: that check would answer first).
  std::sort(bufs.begin(), bufs.end(), [](const DeviceTensor& a, const DeviceTensor& b) {
    return std::less<const void*>()(a.view().data, b.view().data);
  });
  TensorView a = bufs[0].view(), c = bufs[1].view(), b = bufs[2].view();
  b.strides = {int64_t(1) << 36, 1};
  try {
    ck.launch({a, b, c});
    FAIL("a view past its allocation must be refused");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidArgument);
    CHECK_THAT(std::string(e.what()), Contains("argument 'B'") && Contains("past the device allocation it starts in") &&
                                          Contains("claim more memory than was allocated"));
  }
  // The same through a hand-written kernel's tensor argument.
  CudaSource scale;
  scale.name = "scale.cu";
  scale.entry = "scale";
  scale.code = R"(extern "C" __global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; })";
  HandwrittenKernel hk = compile_cuda(gpu(), scale);
  CHECK_THROWS_WITH(hk.launch({1, 1, 1}, {32, 1, 1}, 0, {b}), Contains("past the device allocation"));
  // A view inside its allocation, not at its start, launches: the lower 4 x 4 of each.
  auto lower = [](TensorView v) {
    v.data = static_cast<float*>(v.data) + 4 * 8 + 4, v.dims = {4, 4}, v.strides = {8, 1};
    return v;
  };
  ck.launch({lower(bufs[0].view()), lower(bufs[2].view()), lower(bufs[1].view())});
  gpu().synchronize();
  HostTensor out(DType::f32, {8, 8});
  gpu().download(bufs[1], out);
  float expect = 0; // C[7][7]: row 7 of A's block times column 7 of B's
  for (int k = 0; k < 4; ++k) expect += x.get(7 * 8 + 4 + k) * x.get((4 + k) * 8 + 7);
  CHECK(out.get(63) == expect);
  CHECK(out.get(0) == x.get(0)); // outside the view: untouched
}

TEST_CASE("gpu: a misaligned device pointer is refused", "[gpu][errors]") {
  CompiledKernel ck = gpu().compile(catalogue::add(DType::f32));
  HostTensor x(DType::f32, {8, 8});
  DeviceTensor dx = gpu().upload(x), dz = gpu().upload(x);
  TensorView odd = dx.view();
  odd.data = static_cast<char*>(odd.data) + 1;
  odd.dims = {7, 7};
  odd.strides = {8, 1};
  TensorView z = dz.view();
  z.dims = {7, 7};
  z.strides = {8, 1};
  CHECK_THROWS_WITH(ck.launch({odd, z, z}), Contains("argument 'X' is misaligned"));
}

TEST_CASE("gpu: mismatched launch shapes are refused before anything runs", "[gpu][errors]") {
  CompiledKernel ck = gpu().compile(catalogue::gemm(DType::bf16));
  DeviceTensor a = gpu().allocate(DType::bf16, {8, 5}), b = gpu().allocate(DType::bf16, {6, 4}),
               c = gpu().allocate(DType::bf16, {8, 4});
  CHECK_THROWS_WITH(ck.launch({a.view(), b.view(), c.view()}), Contains("argument 'B' dim 0 is 6 but K = 5"));
}

TEST_CASE("gpu: kernels run on a caller's stream", "[gpu]") {
  // An engine's own non-blocking stream (made here with the driver API, as an engine would).
  CompiledKernel ck = gpu().compile(catalogue::softmax(DType::bf16));
  catalogue::Problem p = catalogue::find("softmax").problem({33, 3000}, DType::bf16, 9);
  catalogue::DeviceProblem d = catalogue::upload(gpu(), p);
  const std::vector<TensorView>& v = d.views;
  cuda::Stream stream(CU_STREAM_NON_BLOCKING);
  ck.launch(v, stream.get());
  stream.synchronize();
  CHECK(catalogue::verify_output(gpu(), d, p).ok);
}

TEST_CASE("gpu: kiln launches on an engine's stream are captured in a CUDA graph, replayed on new data, and verify",
          "[gpu][graph]") {
  // Global capture mode, the strictest (PyTorch's default): any hidden synchronisation or
  // allocation in a launch would end the capture with an error. Every kernel is compiled
  // first, never launched before its capture: the shapes take the sm_90a twin (512^3), the
  // portable fallback (an odd N: its module loads while capturing), a decode twin in
  // K-clusters (16 x 4096 x 4096) and a row kernel.
  struct Step {
    const char* kernel;
    std::vector<int64_t> shape;
  };
  const std::vector<Step> steps = {{"gemm_bias_relu", {512, 512, 512}}, {"gemm_bias_relu", {257, 135, 65}},
                                   {"gemm", {16, 4096, 4096}}, {"softmax", {33, 3000}}};
  std::vector<CompiledKernel> kernels;
  std::vector<catalogue::DeviceProblem> data;
  for (const Step& s : steps) {
    kernels.push_back(gpu().compile(catalogue::find(s.kernel).make(DType::bf16)));
    data.push_back(catalogue::upload(gpu(), catalogue::find(s.kernel).problem(s.shape, DType::bf16, 41)));
  }
  cuda::Stream stream(CU_STREAM_NON_BLOCKING);
  const cuda::Driver& d = cuda::driver();
  KILN_CU_CHECK(d.cuStreamBeginCapture_v2(stream.get(), CU_STREAM_CAPTURE_MODE_GLOBAL));
  std::string failure;
  try {
    for (size_t i = 0; i < steps.size(); ++i) kernels[i].launch(data[i].views, stream.get());
  } catch (const Error& e) {
    failure = e.what();
  }
  cuda::Handle<CUgraph, cuda::DestroyGraph> graph;
  const CUresult ended = d.cuStreamEndCapture(stream.get(), graph.out());
  INFO("a launch while capturing: " << failure);
  REQUIRE(failure.empty());
  REQUIRE(ended == CUDA_SUCCESS);
  cuda::Handle<CUgraphExec, cuda::DestroyGraphExec> exec;
  KILN_CU_CHECK(d.cuGraphInstantiateWithFlags(exec.out(), graph.get(), 0));
  // Replays on fresh inputs written into the captured tensors.
  for (uint64_t seed : {42, 43}) {
    std::vector<catalogue::Problem> fresh;
    for (size_t i = 0; i < steps.size(); ++i) {
      fresh.push_back(catalogue::find(steps[i].kernel).problem(steps[i].shape, DType::bf16, seed));
      for (size_t a = 0; a < fresh[i].args.size(); ++a) {
        if (a == fresh[i].output) continue;
        const TensorView from = fresh[i].args[a].view(), to = data[i].views[a];
        KILN_CU_CHECK(d.cuMemcpyHtoD_v2(reinterpret_cast<CUdeviceptr>(to.data), from.data,
                                        size_t(from.numel()) * size_of(from.dtype)));
      }
    }
    KILN_CU_CHECK(d.cuGraphLaunch(exec.get(), stream.get()));
    stream.synchronize();
    for (size_t i = 0; i < steps.size(); ++i) {
      auto r = catalogue::verify_output(gpu(), data[i], fresh[i]);
      INFO("replay " << seed << ": " << steps[i].kernel << " " << str(steps[i].shape) << ": " << r.summary());
      CHECK(r.ok);
    }
  }
}

TEST_CASE("gpu: time_stream replays work captured in a CUDA graph, and the work is right", "[gpu][graph][profile]") {
  CompiledKernel gemm = gpu().compile(catalogue::gemm_bias_relu(DType::bf16));
  CompiledKernel softmax = gpu().compile(catalogue::softmax(DType::bf16));
  catalogue::Problem pg = catalogue::find("gemm_bias_relu").problem({512, 384, 256}, DType::bf16, 51);
  catalogue::Problem ps = catalogue::find("softmax").problem({64, 2000}, DType::bf16, 52);
  catalogue::DeviceProblem dg = catalogue::upload(gpu(), pg), ds = catalogue::upload(gpu(), ps);
  int calls = 0;
  auto work = [&](void* s) {
    ++calls;
    gemm.launch(dg.views, s);
    softmax.launch(ds.views, s);
  };
  for (bool graph : {false, true}) {
    calls = 0;
    std::vector<double> ms = profile::time_stream(gpu(), work, {.reps = 5, .warmup = 2}, graph);
    INFO((graph ? "graph" : "stream"));
    CHECK(ms.size() == 5);
    for (double m : ms) CHECK(m > 0);
    CHECK(calls == (graph ? 2 : 7)); // a graph: one run as it is, one captured; then replays
    CHECK(catalogue::verify_output(gpu(), dg, pg).ok);
    CHECK(catalogue::verify_output(gpu(), ds, ps).ok);
  }
}

TEST_CASE("gpu: a kernel needing more shared memory than the device allows is refused", "[gpu][errors]") {
  // f32 operands take the SIMT dot, which stages A (128x256) and B (256x256) f32 tiles in
  // shared memory at once: 384 KiB, over the H200's 227 KiB per CTA. The compiler refuses it
  // from its target table before the device is asked.
  Runtime rt = Runtime::create(Backend::cuda, {.num_warps = 32});
  try {
    rt.compile(catalogue::gemm(DType::f32, {.m = 128, .n = 256, .k = 256, .stages = 1}));
    FAIL("the compile should be refused");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Unsupported);
    CHECK_THAT(std::string(e.what()), Contains("bytes of shared memory per CTA"));
    CHECK_THAT(std::string(e.what()), Contains("sm_90a allows at most 232448 (smaller tiles"));
  }
}

TEST_CASE("gpu: time_kernel times launches with CUDA events and leaves a right result", "[gpu][profile]") {
  CompiledKernel ck = gpu().compile(catalogue::gemm_bias_relu(DType::bf16));
  catalogue::Problem p = catalogue::find("gemm_bias_relu").problem({512, 512, 512}, DType::bf16, 21);
  catalogue::DeviceProblem d = catalogue::upload(gpu(), p);
  const std::vector<TensorView>& v = d.views;
  profile::Stat s = profile::time_kernel(gpu(), ck, v, {.reps = 10, .warmup = 2});
  CHECK(s.reps == 10);
  CHECK(s.min > 0);
  // Milliseconds, not microseconds: a 512^3 GEMM takes ~0.01 ms, 112 ms under
  // compute-sanitizer's racecheck, never 1000.
  CHECK(s.median < 1000);
  CHECK(s.p10 <= s.median);
  CHECK(s.median <= s.p90);
  CHECK(catalogue::verify_output(gpu(), d, p).ok);
}

TEST_CASE("gpu: gpu_gemm_async enqueues cuBLASLt on a caller's stream and returns", "[gpu][cublas]") {
  catalogue::Problem p = catalogue::find("gemm_bias_residual").problem({300, 200, 100}, DType::bf16, 17);
  catalogue::DeviceProblem d = catalogue::upload(gpu(), p);
  const std::vector<TensorView>& v = d.views;
  cuda::Stream stream(CU_STREAM_NON_BLOCKING);
  reference::gpu_gemm_async(gpu(), v[0], v[1], &v[2], reference::Epilogue::bias, v[4], &v[3], stream.get());
  stream.synchronize();
  CHECK(catalogue::verify_output(gpu(), d, p).ok);
  // Argument errors are thrown at once, before anything is enqueued.
  CHECK_THROWS_WITH(reference::gpu_gemm_async(gpu(), v[0], v[1], &v[2], reference::Epilogue::bias, v[4], &v[0],
                                              stream.get()),
                    Contains("residual must be [300x200]"));
}

TEST_CASE("gpu: a cubin from the disk cache launches and verifies in a new runtime", "[gpu][cache]") {
  const std::string dir = "kiln-gpu-cache-test-" + std::to_string(::getpid());
  for (DType dt : {DType::f32, DType::bf16}) {
    std::string key;
    {
      Runtime rt = Runtime::create(Backend::cuda, {.cache_dir = dir});
      CompiledKernel ck = rt.compile(catalogue::gemm_bias_gelu(dt, {128, 64, 32, 3}));
      CHECK(ck.cache().outcome == CacheOutcome::miss);
      key = ck.cache().key;
    }
    Runtime rt = Runtime::create(Backend::cuda, {.cache_dir = dir});
    CompiledKernel ck = rt.compile(catalogue::gemm_bias_gelu(dt, {128, 64, 32, 3}));
    CHECK(ck.cache().outcome == CacheOutcome::disk);
    CHECK(ck.cache().key == key);
    CHECK(ck.report().registers > 0);
    for (std::vector<int64_t> s : {std::vector<int64_t>{1, 1, 1}, {300, 200, 100}, {129, 4097, 65}}) {
      catalogue::Problem p = catalogue::find("gemm_bias_gelu").problem(s, dt, 31);
      catalogue::DeviceProblem d = catalogue::upload(rt, p);
      ck.launch(d.views);
      auto r = catalogue::verify_output(rt, d, p);
      INFO(to_string(dt) << " " << str(s) << ": " << r.summary());
      CHECK(r.ok);
    }
  }
  cache::clear(dir);
  (void)!std::system(("rm -rf '" + dir + "'").c_str());
}

TEST_CASE("gpu: entries compiled for deploy without a GPU are disk hits for a runtime on the GPU, and verify",
          "[gpu][cache]") {
  // What `kiln warm` does on a build machine: a compile-only runtime for this GPU's arch,
  // making the entries a runtime on the GPU would. The GPU runtime then compiles nothing.
  const std::string arch = gpu().fingerprint().target;
  const std::string dir = "kiln-gpu-deploy-test-" + std::to_string(::getpid());
  for (const char* name : {"gemm_bias_relu", "softmax"}) {
    const catalogue::Entry& e = catalogue::find(name);
    std::string key, madeBy;
    {
      Runtime offline = Runtime::create(Backend::cuda, {.compile_only = true, .deploy_entries = true, .arch = arch,
                                                        .cache_dir = dir});
      CompiledKernel made = offline.compile(e.make(DType::bf16));
      CHECK(made.cache().outcome == CacheOutcome::miss);
      key = made.cache().key;
      madeBy = made.report().compiler;
    }
    Runtime rt = Runtime::create(Backend::cuda, {.cache_dir = dir});
    CompiledKernel ck = rt.compile(e.make(DType::bf16));
    INFO(name << " on " << arch << ": " << ck.report().compiler);
    CHECK(ck.cache().outcome == CacheOutcome::disk);
    CHECK(ck.cache().key == key);
    // A kernel with twins, made where the toolkit's ptxas was: the machine code ran as loaded.
    if (madeBy.rfind("ptxas", 0) == 0) CHECK_THAT(ck.report().compiler, Contains("ahead of time"));
    for (std::vector<int64_t> s : e.shape_rank == 3 ? std::vector<std::vector<int64_t>>{{256, 256, 512}, {257, 135, 65}}
                                                    : std::vector<std::vector<int64_t>>{{7, 1000}, {300, 64}}) {
      catalogue::Problem p = e.problem(s, DType::bf16, 23);
      catalogue::DeviceProblem d = catalogue::upload(rt, p);
      ck.launch(d.views);
      auto r = catalogue::verify_output(rt, d, p);
      INFO(str(s) << ": " << ck.launch_path(d.views) << "; " << r.summary());
      CHECK(r.ok);
      // The twins run from the entry (machine code from the toolkit's ptxas where the build
      // machine had it, else PTX for this driver's JIT), their register split kept.
      if (arch == "sm_90a" && e.shape_rank == 3 && s[0] == 256) CHECK(ck.launch_path(d.views).rfind("sm_90a twin", 0) == 0);
    }
  }
  cache::clear(dir);
  (void)!std::system(("rm -rf '" + dir + "'").c_str());
}

TEST_CASE("gpu: by default a kernel's twins are ptxas's machine code exactly where KILN_HOPPER_JIT=ptxas finds "
          "a ptxas, else the driver's JIT's; KILN_HOPPER_JIT=driver asks for the driver's", "[gpu][sm90]") {
  if (gpu().fingerprint().target != "sm_90a") {
    WARN("not run: the twins are sm_90a's, and this GPU is " << gpu().fingerprint().target);
    return;
  }
  bool found = true; // a ptxas of nvJitLink's release, as KILN_HOPPER_JIT=ptxas requires
  {
    ScopedEnv jit("KILN_HOPPER_JIT", "ptxas");
    try {
      (void)Runtime::create(Backend::cuda, {.cache_dir = "off"});
    } catch (const Error& e) {
      found = false;
      WARN("no ptxas here, so the default is the driver's JIT: " << e.what());
    }
  }
  for (const char* mode : {"(unset)", "auto", "driver"}) {
    ScopedEnv jit("KILN_HOPPER_JIT", mode); // restores the caller's setting after each mode
    if (std::string(mode) == "(unset)") ::unsetenv("KILN_HOPPER_JIT");
    Runtime rt = Runtime::create(Backend::cuda, {.cache_dir = "off"});
    CompiledKernel ck = rt.compile(catalogue::gemm_bias_relu(DType::bf16));
    const bool byPtxas = found && std::string(mode) != "driver";
    INFO(mode << ": " << ck.report().compiler);
    CHECK((ck.report().compiler.find("in place of the driver's JIT: the cache keeps machine code") != std::string::npos) ==
          byPtxas);
    CHECK((ck.report().compiler.find("CUDA driver PTX JIT") != std::string::npos) == !byPtxas);
    CHECK(ck.report().spill_bytes == 0);
    catalogue::Problem p = catalogue::find("gemm_bias_relu").problem({256, 256, 512}, DType::bf16, 31);
    catalogue::DeviceProblem d = catalogue::upload(rt, p);
    CHECK(ck.launch_path(d.views).rfind("sm_90a twin", 0) == 0);
    ck.launch(d.views);
    auto r = catalogue::verify_output(rt, d, p);
    INFO(r.summary());
    CHECK(r.ok);
  }
}

TEST_CASE("gpu: with KILN_HOPPER_JIT=ptxas a kernel's twins are the toolkit's ptxas's machine code, kept by the "
          "cache and loaded from it without a JIT, and verify", "[gpu][sm90][cache]") {
  if (gpu().fingerprint().target != "sm_90a") {
    WARN("not run: the twins are sm_90a's, and this GPU is " << gpu().fingerprint().target);
    return;
  }
  ScopedEnv jit("KILN_HOPPER_JIT", "ptxas");
  const std::string dir = "kiln-gpu-ptxas-test-" + std::to_string(::getpid());
  for (CacheOutcome want : {CacheOutcome::miss, CacheOutcome::disk}) {
    std::optional<Runtime> rt;
    try {
      rt = Runtime::create(Backend::cuda, {.cache_dir = dir});
    } catch (const Error& e) { // no ptxas of nvJitLink's release on this machine: said, not run
      REQUIRE(e.kind() == ErrorKind::InvalidArgument);
      CHECK_THAT(e.what(), Contains("KILN_HOPPER_JIT=ptxas"));
      WARN("not run: " << e.what());
      return;
    }
    CompiledKernel ck = rt->compile(catalogue::gemm_bias_relu(DType::bf16));
    INFO(to_string(want) << ": " << ck.report().compiler);
    CHECK(ck.cache().outcome == want);
    // Made by ptxas, and on the disk hit read back as that machine code (the driver's JIT
    // would have written its own report).
    CHECK_THAT(ck.report().compiler, Contains("ptxas") && Contains("in place of the driver's JIT: the cache keeps machine code"));
    CHECK_THAT(ck.report().compiler, !Contains("CUDA driver PTX JIT"));
    CHECK(ck.report().spill_bytes == 0);
    // ptxas's report of every twin, each without spills (the register split kept).
    auto count = [&](const std::string& what) {
      const std::string& text = ck.report().sm90;
      size_t n = 0;
      for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
      return n;
    };
    if (want == CacheOutcome::miss) CHECK(count(" spill bytes") == count("__sm90"));
    CHECK(count(", 0 spill bytes") == count(" spill bytes"));
    for (std::vector<int64_t> s : {std::vector<int64_t>{256, 256, 512}, {257, 135, 65}}) {
      catalogue::Problem p = catalogue::find("gemm_bias_relu").problem(s, DType::bf16, 29);
      catalogue::DeviceProblem d = catalogue::upload(*rt, p);
      const std::string path = ck.launch_path(d.views);
      ck.launch(d.views);
      auto r = catalogue::verify_output(*rt, d, p);
      INFO(str(s) << ": " << path << "; " << r.summary());
      CHECK(r.ok);
      CHECK((path.rfind("sm_90a twin", 0) == 0) == (s[0] == 256)); // 135 columns: no 16-byte pitch
    }
  }
  cache::clear(dir);
  (void)!std::system(("rm -rf '" + dir + "'").c_str());
}

TEST_CASE("gpu: a kernel's twin is ready first, its portable fallback follows from a second thread, "
          "after a compile and from the disk cache", "[gpu][sm90][cache]") {
  // On sm_90a, with the driver's JIT (not ptxas), the twin's module goes to the driver while
  // the portable kernel compiles on a thread of its own; a launch the twin cannot take (an
  // odd N) waits for it. A disk hit loads the twin and starts the fallback's thread again.
  // Elsewhere: one module, as ever.
  ScopedEnv jit("KILN_HOPPER_JIT", "driver");
  const bool hopper = gpu().fingerprint().target == "sm_90a";
  const std::string dir = "kiln-gpu-fallback-test-" + std::to_string(::getpid());
  for (CacheOutcome want : {CacheOutcome::miss, CacheOutcome::disk}) {
    Runtime rt = Runtime::create(Backend::cuda, {.cache_dir = dir});
    CompiledKernel ck = rt.compile(catalogue::gemm_bias_relu(DType::bf16));
    CHECK(ck.cache().outcome == want);
    const bool split = ck.report().compiler.find("portable fallback compiled on a second thread") != std::string::npos;
    CHECK(split == hopper);
    for (std::vector<int64_t> s : {std::vector<int64_t>{256, 256, 512}, {257, 135, 65}, {300, 200, 100}, {300, 200, 104}}) {
      catalogue::Problem p = catalogue::find("gemm_bias_relu").problem(s, DType::bf16, 17);
      catalogue::DeviceProblem d = catalogue::upload(rt, p);
      const std::string path = ck.launch_path(d.views);
      INFO(to_string(want) << " " << str(s) << ": " << path);
      // The twin wants 16-byte row pitches: N and K multiples of 8 (bf16).
      if (hopper) CHECK((path.rfind("sm_90a twin", 0) == 0) == (s[1] % 8 == 0 && s[2] % 8 == 0));
      ck.launch(d.views);
      auto r = catalogue::verify_output(rt, d, p);
      INFO(r.summary());
      CHECK(r.ok);
    }
    // The fallback's figures, once its thread is done.
    CHECK(ck.report().registers > 0);
    CHECK(ck.report().spill_bytes == 0);
    CHECK((ck.times().fallback_ms > 0) == split);
  }
  cache::clear(dir);
  (void)!std::system(("rm -rf '" + dir + "'").c_str());
}

TEST_CASE("gpu: a kernel's twins load as one module whose JIT spreads over compile_threads: one thread makes the "
          "same machine code, the report reads the JIT's own log, and nothing goes to stderr", "[gpu][sm90]") {
  if (gpu().fingerprint().target != "sm_90a") {
    WARN("not run: the twins are sm_90a's, and this GPU is " << gpu().fingerprint().target);
    return;
  }
  // gemm_bias_relu (bf16, kiln's default tiles) under a name no earlier process used: PTX
  // the driver's own cache cannot answer, so both runtimes below run its JIT (asked for: by
  // default a ptxas of nvJitLink's release compiles twins where the toolkit has one).
  ScopedEnv jit("KILN_HOPPER_JIT", "driver");
  auto named = [](const std::string& name) {
    using namespace kiln::dsl;
    return kernel(name, [](Builder& k) {
      auto [M, N, K] = k.dims("M", "N", "K");
      auto A = k.input("A", {M, K}, bf16), B = k.input("B", {K, N}, bf16), bias = k.input("bias", {N}, bf16);
      auto C = k.output("C", {M, N}, bf16);
      k.grid({cdiv(M, 64), cdiv(N, 64)}, [&](Index i, Index j) {
        Tile acc = k.loop(cdiv(K, 32), 3, k.zeros({64, 64}), [&](Index kk, const Tile& c) {
          return dot(k.load(A.tile({i, kk}, {64, 32})), k.load(B.tile({kk, j}, {32, 64})), c);
        });
        k.store(C.tile({i, j}, {64, 64}), cast(relu(acc + rows(cast(k.load(bias.tile({j}, {64})), f32))), bf16));
      });
    });
  };
  std::string twins[2]; // each runtime's report of its twins, named alike
  for (int threads : {0, 1}) {
    const std::string name = "jit_split_" + std::to_string(::getpid()) + "_" + std::to_string(threads);
    Runtime rt = Runtime::create(Backend::cuda, {.compile_threads = threads, .cache_dir = "off"});
    // fd 2 to a file while the driver compiles: its split compile must log where the
    // report reads, not on the engine's stderr.
    char path[] = "/tmp/kiln-jit-stderr-XXXXXX";
    const int file = ::mkstemp(path);
    REQUIRE(file >= 0);
    std::fflush(stderr);
    const int saved = ::dup(2);
    ::dup2(file, 2);
    std::optional<CompiledKernel> ck;
    try {
      ck = rt.compile(named(name));
    } catch (...) {
      ::dup2(saved, 2);
      throw;
    }
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    std::string written(size_t(::lseek(file, 0, SEEK_END)), '\0');
    (void)!::pread(file, written.data(), written.size(), 0);
    ::close(file);
    ::unlink(path);
    const KernelReport r = ck->report();
    INFO("compile_threads " << threads << "; compiler: " << r.compiler << "; twins: " << r.sm90 << "; stderr: " << written);
    CHECK(written.empty());
    CHECK_THAT(r.compiler, !Contains("JIT cache")); // a JIT ran, and its log came back
    CHECK_THAT(r.sm90, Contains(name + "__sm90_n256") && Contains("registers") && Contains(" 0 spill bytes"));
    std::string named_alike = r.sm90;
    for (size_t at; (at = named_alike.find(name)) != std::string::npos;) named_alike.replace(at, name.size(), "k");
    twins[threads] = named_alike;
    for (std::vector<int64_t> s : {std::vector<int64_t>{256, 256, 512}, {64, 1024, 512}, {1000, 1000, 1000}}) {
      catalogue::Problem p = catalogue::find("gemm_bias_relu").problem(s, DType::bf16, 23);
      catalogue::DeviceProblem d = catalogue::upload(rt, p);
      INFO(str(s) << ": " << ck->launch_path(d.views));
      CHECK(ck->launch_path(d.views).rfind("sm_90a twin", 0) == 0);
      ck->launch(d.views);
      auto v = catalogue::verify_output(rt, d, p);
      INFO(v.summary());
      CHECK(v.ok);
    }
  }
  CHECK(twins[0] == twins[1]); // every twin's registers and spill bytes
}

TEST_CASE("gpu: a kernel using exactly 48 KiB of dynamic shared memory launches", "[gpu]") {
  // 4 stages x (96x32 + 32x64) bf16, rows padded by 8 elements for ldmatrix (pitches 40 and
  // 72) = 49152 bytes: the size that failed to launch before every kernel opted in to its
  // shared memory.
  Runtime rt = Runtime::create(Backend::cuda, {.cache_dir = "off"});
  CompiledKernel ck = rt.compile(catalogue::gemm_bias_relu(DType::bf16, {96, 64, 32, 4}));
  CHECK(ck.report().shared_bytes == 49152);
  catalogue::Problem p = catalogue::find("gemm_bias_relu").problem({300, 200, 257}, DType::bf16, 8);
  catalogue::DeviceProblem d = catalogue::upload(rt, p);
  ck.launch(d.views);
  CHECK(catalogue::verify_output(rt, d, p).ok);
}

TEST_CASE("gpu: every elementwise math op agrees with the CPU backend", "[gpu]") {
  // One scalar emitter (lib/Transforms/ScalarMath) serves both backends; the GPU's exp,
  // log and tanh are polynomials and exp2 is ex2.approx, so agreement is to 1e-5 relative plus 1e-6 absolute (gelu cancels near -3).
  Runtime cpu = Runtime::create(Backend::cpu);
  const int64_t n = 1000;
  HostTensor x(DType::f32, {n});
  for (int64_t i = 0; i < n; ++i) x.set(i, 0.01f + 8.0f * float(i) / float(n) * (i % 3 == 0 ? -1.0f : 1.0f));
  for (const auto& [name, op] : test::unaryOps()) {
    INFO(name);
    Kernel k = test::unaryKernel(name, op);
    HostTensor want(DType::f32, {n}), got(DType::f32, {n});
    want.poison();
    cpu.compile(k).launch({x.view(), want.view()});
    DeviceTensor dx = gpu().upload(x), dy = gpu().allocate(DType::f32, {n});
    gpu().compile(k).launch({dx.view(), dy.view()});
    gpu().download(dy, got);
    int bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      float w = want.get(i), g = got.get(i);
      bool ok = std::isnan(w) ? std::isnan(g) : std::fabs(g - w) <= 1e-5f * std::fabs(w) + 1e-6f;
      if (!ok && ++bad <= 3) UNSCOPED_INFO(name << "(" << x.get(i) << "): gpu " << g << ", cpu " << w);
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("gpu: row statistics of a product's scores, kept in their rows and stored as rows, agree with the CPU backend", "[gpu]") {
  // Each warp holds whole rows of the scores: the row max and sum stay in registers across
  // the loop (the rows layout), and one lane per quad stores each row.
  const int64_t M = 200, N = 333, D = 64;
  Kernel k = test::scoreRowStats(DType::bf16, D);
  HostTensor q(DType::bf16, {M, D}), kk(DType::bf16, {N, D}), mx(DType::f32, {M}), sum(DType::f32, {M});
  q.fill_random(4), kk.fill_random(5);
  HostTensor gmx(DType::f32, {M}), gsum(DType::f32, {M});
  mx.poison(), sum.poison(), gmx.poison(), gsum.poison();
  Runtime::create(Backend::cpu).compile(k).launch({q.view(), kk.view(), mx.view(), sum.view()});
  DeviceTensor dq = gpu().upload(q), dk = gpu().upload(kk), dm = gpu().upload(gmx), ds = gpu().upload(gsum);
  gpu().compile(k).launch({dq.view(), dk.view(), dm.view(), ds.view()});
  gpu().download(dm, gmx), gpu().download(ds, gsum);
  for (int64_t r = 0; r < M; ++r) {
    INFO("row " << r);
    CHECK(std::abs(gmx.get(r) - mx.get(r)) <= 1e-4f * (1 + std::abs(mx.get(r))));
    CHECK(std::abs(gsum.get(r) - sum.get(r)) <= 1e-3f * (1 + std::abs(sum.get(r))));
  }
}

TEST_CASE("gpu: masks, transposes and attention written in the DSL agree with the CPU backend and the reference", "[gpu]") {
  Runtime cpu = Runtime::create(Backend::cpu);
  auto both = [&](const Kernel& k, std::vector<HostTensor>& in, HostTensor& want, HostTensor& got) {
    std::vector<TensorView> hv;
    std::vector<DeviceTensor> dev;
    std::vector<TensorView> dv;
    for (HostTensor& t : in) hv.push_back(t.view()), dev.push_back(gpu().upload(t));
    got.poison(); // what the GPU leaves unwritten reads NaN
    DeviceTensor out = gpu().upload(got);
    for (DeviceTensor& d : dev) dv.push_back(d.view());
    hv.push_back(want.view()), dv.push_back(out.view());
    want.poison();
    cpu.compile(k).launch(hv);
    gpu().compile(k).launch(dv);
    gpu().download(out, got);
  };
  for (DType dt : {DType::f32, DType::bf16}) {
    INFO(to_string(dt));
    std::vector<HostTensor> x{HostTensor(dt, {77, 130})};
    x[0].fill_random(7);
    HostTensor want(dt, {77, 130}), got(dt, {77, 130});
    both(test::causalMask(dt), x, want, got);
    for (int64_t e = 0; e < want.numel(); ++e) REQUIRE(got.get(e) == want.get(e));
    HostTensor wantT(dt, {130, 77}), gotT(dt, {130, 77});
    both(test::transposeCopy(dt), x, wantT, gotT);
    for (int64_t e = 0; e < wantT.numel(); ++e) REQUIRE(gotT.get(e) == wantT.get(e));
  }
  // On the tensor cores in bf16 (P rounded to bf16 before P V), against the f64 reference.
  for (bool causal : {false, true})
    for (int64_t S : {64, 200}) {
      INFO((causal ? "causal" : "full") << " S=" << S);
      std::vector<HostTensor> qkv;
      for (int t = 0; t < 3; ++t) qkv.emplace_back(DType::bf16, std::vector<int64_t>{S, 64}), qkv.back().fill_random(uint64_t(S + t));
      HostTensor want(DType::bf16, {S, 64}), got(DType::bf16, {S, 64});
      both(test::attention(DType::bf16, 64, causal), qkv, want, got);
      std::vector<double> ref = test::attentionReference(qkv[0], qkv[1], qkv[2], causal);
      CHECK(test::worstError(got, ref) < 2e-2);
      CHECK(test::worstError(want, ref) < 2e-2);
    }
}

TEST_CASE("gpu: attention over padded sequences reads each length from an i32 input and agrees with the reference, "
          "NaN padding never reaching a result (the sm_90a twin on Hopper)",
          "[gpu]") {
  const int64_t B = 4, H = 4, group = 2, G = H / group, S = 130;
  const std::vector<int32_t> lens = {130, 77, 64, 500}; // 500: taken as S
  const bool hopper = gpu().fingerprint().target == "sm_90a";
  for (int64_t D : {64, 128}) {
    HostTensor q(DType::bf16, {B, H, S, D}), k(DType::bf16, {B, G, S, D}), v(DType::bf16, {B, G, S, D}),
        o(DType::bf16, {B, H, S, D}), l(DType::i32, {B});
    q.fill_random(1), k.fill_random(2), v.fill_random(3);
    // The padding past each length: NaN in K and V (a window reads zeros there, whatever
    // the memory holds), and in Q (its rows' outputs are padding too).
    for (int64_t n = 0; n < B; ++n) {
      l.set(n, float(lens[size_t(n)]));
      for (int64_t t = std::min<int64_t>(lens[size_t(n)], S); t < S; ++t)
        for (int64_t x = 0; x < D; ++x) {
          for (int64_t g = 0; g < G; ++g) k.set(((n * G + g) * S + t) * D + x, NAN), v.set(((n * G + g) * S + t) * D + x, NAN);
          for (int64_t h = 0; h < H; ++h) q.set(((n * H + h) * S + t) * D + x, NAN);
        }
    }
    for (bool causal : {false, true}) {
      INFO("D " << D << (causal ? " causal" : " full"));
      o.poison();
      DeviceTensor dq = gpu().upload(q), dk = gpu().upload(k), dv = gpu().upload(v), dl = gpu().upload(l),
                   dout = gpu().upload(o);
      const std::vector<TensorView> args = {dq.view(), dk.view(), dv.view(), dl.view(), dout.view()};
      CompiledKernel ck = gpu().compile(test::paddedAttention(DType::bf16, D, causal, group));
      const std::string path = ck.launch_path(args);
      INFO(path);
      CHECK((path.rfind("sm_90a twin", 0) == 0) == hopper);
      ck.launch(args);
      gpu().download(dout, o);
      const std::vector<double> worst = test::paddedAttentionErrors(q, k, v, o, lens, group, causal);
      REQUIRE(worst.size() == size_t(B * H));
      for (size_t head = 0; head < worst.size(); ++head) {
        INFO("batch " << head / H << " head " << head % H);
        CHECK(worst[head] < 2e-2);
      }
    }
  }
}

TEST_CASE("gpu: attention over sequences packed end to end windows each tensor to its sequence and agrees with "
          "the reference, writing nothing past the last sequence (the sm_90a twin on Hopper)", "[gpu]") {
  const int64_t H = 4, group = 2, G = H / group, T = 420;
  // 130, 77 (ragged), 64 (one tile), 0 and 139 tokens; 10 tokens of no sequence after them
  // (NaN in Q, K and V: the twin's tiles read them, and nothing of them may reach a result).
  const std::vector<int32_t> offsets = {0, 130, 207, 271, 271, 410};
  const bool hopper = gpu().fingerprint().target == "sm_90a";
  for (int64_t D : {64, 128})
    for (bool causal : {false, true}) {
      INFO("D " << D << (causal ? " causal" : " full"));
      test::PackedInputs in(DType::bf16, T, H, G, D, offsets);
      const HostTensor untouched = in.o;
      DeviceTensor dq = gpu().upload(in.q), dk = gpu().upload(in.k), dv = gpu().upload(in.v),
                   doff = gpu().upload(in.offsets), dout = gpu().upload(in.o);
      const std::vector<TensorView> args = {test::packedView(dq.view()), test::packedView(dk.view()),
                                            test::packedView(dv.view()), doff.view(), test::packedView(dout.view())};
      CompiledKernel ck = gpu().compile(test::packedAttention(DType::bf16, D, causal, group));
      const std::string path = ck.launch_path(args);
      INFO(path);
      CHECK((path.rfind("sm_90a twin", 0) == 0) == hopper);
      ck.launch(args);
      gpu().download(dout, in.o);
      test::checkPacked(in, untouched, offsets, group, causal, 2e-2);
    }
}

TEST_CASE("gpu: packed attention leaves a sequence whose window starts before the tensor empty, as the CPU does "
          "(the sm_90a twin clips windows as the portable kernel does)", "[gpu]") {
  for (int64_t D : {64, 128})
    for (bool causal : {false, true}) {
      INFO("D " << D << (causal ? " causal" : " full"));
      test::checkPackedNegativeStart(gpu(), DType::bf16, D, causal, 2, 64, 2e-2);
    }
}

TEST_CASE("gpu: packed attention whose sequences overlap (one sequence twice) is still computed for every one, "
          "the twin's CTAs taking more than one sequence unit each", "[gpu]") {
  // Sequences 0 and 2 are both tokens [0, 400), sequence 1 none ([400, 0)). On sm_90a the
  // twin's grid holds ceildiv(420, 128) + 3 = 7 units a head, the sequences 4 + 4 = 8: its
  // first CTA of each head takes a second round. Both write the same rows, the same values.
  const int64_t H = 4, group = 2, G = H / group, T = 420;
  const std::vector<int32_t> offsets = {0, 400, 0, 400};
  for (bool causal : {false, true}) {
    INFO((causal ? "causal" : "full"));
    test::PackedInputs in(DType::bf16, T, H, G, 128, offsets);
    const HostTensor untouched = in.o;
    DeviceTensor dq = gpu().upload(in.q), dk = gpu().upload(in.k), dv = gpu().upload(in.v),
                 doff = gpu().upload(in.offsets), dout = gpu().upload(in.o);
    const std::vector<TensorView> args = {test::packedView(dq.view()), test::packedView(dk.view()),
                                          test::packedView(dv.view()), doff.view(), test::packedView(dout.view())};
    CompiledKernel ck = gpu().compile(test::packedAttention(DType::bf16, 128, causal, group));
    INFO(ck.launch_path(args));
    ck.launch(args);
    gpu().download(dout, in.o);
    test::checkPacked(in, untouched, offsets, group, causal, 2e-2);
  }
}

TEST_CASE("gpu: batched attention with grouped K/V heads agrees with the reference head by head, "
          "its softmax overlapped with the product before it or not", "[gpu]") {
  const int64_t B = 2, H = 4, group = 2, G = H / group, S = 130, D = 64;
  HostTensor q(DType::bf16, {B, H, S, D}), k(DType::bf16, {B, G, S, D}), v(DType::bf16, {B, G, S, D}),
      o(DType::bf16, {B, H, S, D});
  q.fill_random(1), k.fill_random(2), v.fill_random(3);
  // readsAcc: a loop whose running sum reads the accumulator, which the sm_90a twin runs
  // without the overlap (each step's softmax after both of its products).
  for (bool readsAcc : {false, true}) {
    INFO((readsAcc ? "reads acc" : "plain"));
    o.poison(); // an output the kernel leaves unwritten reads NaN, never last run's numbers
    DeviceTensor dq = gpu().upload(q), dk = gpu().upload(k), dv = gpu().upload(v), dout = gpu().upload(o);
    CompiledKernel ck = gpu().compile(test::groupedAttention(DType::bf16, D, true, group, 64, readsAcc));
    if (gpu().fingerprint().target == "sm_90a")
      CHECK_THAT(ck.report().sm90, Contains(readsAcc ? "softmax after its products" : "softmax overlaps"));
    ck.launch({dq.view(), dk.view(), dv.view(), dout.view()});
    gpu().download(dout, o);
    const std::vector<double> worst = test::groupedAttentionErrors(q, k, v, o, group, true);
    REQUIRE(worst.size() == size_t(B * H));
    for (size_t head = 0; head < worst.size(); ++head) {
      INFO("batch " << head / H << " head " << head % H);
      CHECK(worst[head] < 2e-2);
    }
  }
}

namespace {
// The twin test's runtimes, made once per process: the test runs once per kernel and dtype
// (a section each, so a slow tool such as compute-sanitizer's racecheck can take them one
// process at a time), and 18 runtimes per run would cost seconds each time.
struct TwinRuntimes {
  Runtime portable = Runtime::create(Backend::cuda, {.hopper_gemm = false});
  Runtime wide = Runtime::create(Backend::cuda, {.hopper_tile_n = 256});
  // Pairs of CTAs sharing A by multicast, both widths (odd tile columns leave a CTA of the
  // last pair without a tile: it loads zeros and stores nothing).
  Runtime paired = Runtime::create(Backend::cuda, {.hopper_tile_n = 128, .hopper_cluster = 2});
  Runtime pairedWide = Runtime::create(Backend::cuda, {.hopper_tile_n = 256, .hopper_cluster = 2});
  // Fours side by side sharing A (each CTA multicasts a quarter of its rows; up to three CTAs
  // of the last four past C's columns), every tile: kiln's tiles take them only for one row
  // of 128 x 128 tiles in one round.
  Runtime quads = Runtime::create(Backend::cuda, {.hopper_cluster = 4});
  // The 64 x 128 tile (one consumer warpgroup) on every shape, alone and in pairs side by side
  // (by default it runs in stacked pairs: gpu() and `stacked` below).
  Runtime low = Runtime::create(Backend::cuda, {.hopper_tile_m = 64, .hopper_cluster = 1});
  Runtime pairedLow = Runtime::create(Backend::cuda, {.hopper_tile_m = 64, .hopper_cluster = 2});
  // Pairs of vertically adjacent tiles sharing B by multicast (each CTA loads half its
  // boxes), every tile and the wide one alone (two boxes per CTA).
  Runtime stacked = Runtime::create(Backend::cuda, {.hopper_cluster = 2, .hopper_cluster_m = true});
  Runtime stackedWide =
      Runtime::create(Backend::cuda, {.hopper_tile_n = 256, .hopper_cluster = 2, .hopper_cluster_m = true});
  // 192-wide tiles (three B boxes): 128 x 192 alone, both heights in stacked pairs, where the
  // boxes do not split evenly (two for one CTA, one for the other), and side by side.
  Runtime narrow = Runtime::create(Backend::cuda, {.hopper_tile_n = 192, .hopper_tile_m = 128, .hopper_cluster = 1});
  Runtime stackedNarrow = Runtime::create(
      Backend::cuda, {.hopper_tile_n = 192, .hopper_tile_m = 64, .hopper_cluster = 2, .hopper_cluster_m = true});
  Runtime stackedNarrowTall =
      Runtime::create(Backend::cuda, {.hopper_tile_n = 192, .hopper_cluster = 2, .hopper_cluster_m = true});
  Runtime pairedNarrow = Runtime::create(Backend::cuda, {.hopper_tile_n = 192, .hopper_cluster = 2});
  // Ping-pong 64 x 256 tiles (two consumers taking a CTA's tiles in turn; 2049 x 2056 gives
  // CTAs two and three tiles), alone and in stacked pairs. Not beside a residual: the
  // portable kernel runs gemm_bias_residual there.
  Runtime pingpong = Runtime::create(Backend::cuda, {.hopper_tile_n = 256, .hopper_tile_m = 64, .hopper_cluster = 1});
  Runtime stackedPingpong = Runtime::create(
      Backend::cuda, {.hopper_tile_n = 256, .hopper_tile_m = 64, .hopper_cluster = 2, .hopper_cluster_m = true});
  // The tall 256 x 128 tile (two consumer warpgroups of two 64-row parts each), alone: C of
  // fewer rows than it (its A box partly past A), and 2049 rows (its last row of tiles moved
  // up inside A, 255 rows of it another tile's); and in stacked pairs sharing B (a pair's
  // second CTA past C's rows where C has one row of them).
  Runtime tall = Runtime::create(Backend::cuda, {.hopper_tile_m = 256, .hopper_cluster = 1});
  Runtime stackedTall =
      Runtime::create(Backend::cuda, {.hopper_tile_m = 256, .hopper_cluster = 2, .hopper_cluster_m = true});
  // Split-K wherever the tiles leave the last round of CTAs part-empty, both widths: tiles
  // cut into chunks of k-steps, summed in order by whichever CTA finishes its chunk last.
  // (Clusters off: clustered twins take whole tiles.)
  // (Without the swapped twins of 128 columns, which take whole tiles: 300 x 200 x 1000 would
  // go to one.)
  Runtime splitK = [] {
    ScopedEnv on("KILN_HOPPER_SPLIT_K", "on"), wideOff("KILN_HOPPER_WIDE", "off");
    return Runtime::create(Backend::cuda, {.hopper_cluster = 1});
  }();
  Runtime splitKWide = [] {
    ScopedEnv on("KILN_HOPPER_SPLIT_K", "on");
    return Runtime::create(Backend::cuda, {.hopper_tile_n = 256, .hopper_cluster = 1});
  }();
  Runtime splitKLowNarrow = [] {
    ScopedEnv on("KILN_HOPPER_SPLIT_K", "on");
    return Runtime::create(Backend::cuda, {.hopper_tile_n = 192, .hopper_tile_m = 64, .hopper_cluster = 1});
  }();
};
const TwinRuntimes& twinRuntimes() {
  static const TwinRuntimes r;
  return r;
}
} // namespace

TEST_CASE("gpu: the sm_90a TMA + wgmma twin is right on ragged shapes, beside the portable kernel", "[gpu][sm90]") {
  // Shapes the twin takes (K and N multiples of 8: 16-byte rows), ragged against its
  // 128 x 128|192|256 and 64 x 128|192 tiles (k-steps of 64), and small ones (one k-tile, one CTA).
  // {2049, 2056, 136}: more tiles than SMs (a persistent CTA takes several, its ring
  // counters carried across them) and 3 k-tiles, fewer than the 4 stages; kiln's tiles run
  // it on the 128 x 192 twin (two rounds, where the others take three).
  // {300, 200, 1000}: ragged tiles whose 16 k-steps split-K cuts into chunks. {16, 264, 1024}:
  // a decode shape split-K cuts, where three of a 64-row tile's four warps hold no row of C;
  // with {3, 200, 1000}, {1, 4104, 520} and {17, 136, 328}, the decode twins' shapes (in
  // K-clusters of 4, 4 and 2, and whole); {40, 264, 1000} and {64, 4104, 520} the 48- and 64-row
  // ones' (in fours, in pairs); {77, 136, 72}, {128, 256, 4096} and {100, 1032, 1000} C of more
  // rows than a decode tile, in two rows of decode tiles (whole, in fours, in pairs);
  // {160, 1032, 1000} and {257, 2056, 520} C of 129 to 512 rows: swapped twins of 128 columns
  // (two rows of 80-row tiles; three of 96), ragged in N and K. {128, 12352, 264} and
  // {100, 12352, 136}: one row of tiles too wide for two rows of decode tiles or 64 x 128 pairs
  // in one round: 64 x 192 tiles in stacked pairs (65 of them, the last ragged in N; the
  // second ragged in M and K too). {128, 14336, 264}: too wide for those in one round: 128 x
  // 128 tiles in fours sharing A (28 of them).
  const std::vector<std::vector<int64_t>> shapes = {{1, 8, 8},         {77, 136, 72},     {1000, 1000, 1000},
                                                   {4097, 264, 128},  {129, 4096, 264},  {300, 200, 8},
                                                   {128, 256, 4096},  {2049, 2056, 136}, {300, 200, 1000},
                                                   {16, 264, 1024},   {3, 200, 1000},    {1, 4104, 520},
                                                   {17, 136, 328},    {40, 264, 1000},   {64, 4104, 520},
                                                   {100, 1032, 1000}, {160, 1032, 1000}, {257, 2056, 520},
                                                   {128, 12352, 264}, {100, 12352, 136}, {128, 14336, 264}};
  const TwinRuntimes& r = twinRuntimes();
  const bool hopper = gpu().fingerprint().target == "sm_90a";
  for (const char* name : {"gemm", "gemm_bias_relu", "gemm_bias_gelu", "gemm_bias_residual"})
    for (DType d : {DType::bf16, DType::f16})
      DYNAMIC_SECTION(name << " " << to_string(d)) {
        const catalogue::Entry& e = catalogue::find(name);
        std::map<const Runtime*, int> splitLaunches, decodeLaunches, wideLaunches;
        for (const Runtime* rt : std::initializer_list<const Runtime*>{
                 &gpu(), &r.wide, &r.paired, &r.pairedWide, &r.quads, &r.low, &r.pairedLow, &r.stacked, &r.stackedWide,
                 &r.narrow, &r.stackedNarrow, &r.stackedNarrowTall, &r.pairedNarrow, &r.pingpong, &r.stackedPingpong,
                 &r.tall, &r.stackedTall, &r.splitK, &r.splitKWide, &r.splitKLowNarrow, &r.portable}) {
          CompiledKernel ck = rt->compile(e.make(d));
          INFO(name << " " << to_string(d) << ": " << ck.report().str());
          if (rt != &r.portable) CHECK(ck.report().sm90.empty() != hopper); // a twin exactly on Hopper
          const bool twin = hopper && rt != &r.portable &&
                            !((rt == &r.pingpong || rt == &r.stackedPingpong) && std::string(name) == "gemm_bias_residual");
          uint64_t seed = 7;
          for (const auto& s : shapes) {
            catalogue::Problem p = e.problem(s, d, seed++);
            catalogue::DeviceProblem dp = catalogue::upload(gpu(), p);
            // The twin really runs where it should (device memory is 256-byte aligned).
            std::string path = ck.launch_path(dp.views);
            INFO("shape " << str(s) << ": " << path);
            CHECK((path.rfind("sm_90a twin", 0) == 0) == twin);
            if (twin && rt == &gpu() && s == std::vector<int64_t>{2049, 2056, 136})
              CHECK(path.find("__sm90_n192") != std::string::npos);
            if (twin && rt == &gpu() && s[1] == 12352) CHECK(path.find("__sm90_m64n192x2") != std::string::npos);
            if (twin && rt == &gpu() && s[1] == 14336) CHECK(path.find("__sm90x4") != std::string::npos);
            // The decode twins (C of at most 128 rows, kiln's tiles) split on their own: counted apart.
            if (path.find("__sm90_dec") != std::string::npos) {
              CHECK(s[0] <= 128);
              ++decodeLaunches[rt];
            } else if (path.find("__sm90_sw") != std::string::npos) {
              CHECK(s[0] > 128);
              CHECK(s[0] <= 512);
              ++wideLaunches[rt];
            } else if (path.find("split-K") != std::string::npos) {
              ++splitLaunches[rt];
            }
            ck.launch(dp.views);
            verify::Report rep = catalogue::verify_output(gpu(), dp, p);
            INFO(rep.summary());
            CHECK(rep.ok);
          }
        }
        // The split-K runtimes really cut tiles (on 1000^3, 128 x 256 x 4096, 300 x 200 x 1000 at
        // least), and no other runtime does.
        if (hopper) {
          CHECK(splitLaunches[&r.splitK] >= 2); // 128 x 256 x 4096 takes a decode twin there
          CHECK(splitLaunches[&r.splitKWide] >= 3);
          CHECK(splitLaunches[&r.splitKLowNarrow] >= 3);
          CHECK(splitLaunches.size() == 3);
          // Every shape of at most 64 rows, and the three of at most 128 whose two rows of decode
          // tiles fill one round, went to a decode twin where kiln picks the tiles.
          for (const Runtime* rt : {&gpu(), &r.splitK}) CHECK(decodeLaunches[rt] == 10);
          CHECK(decodeLaunches.count(&r.wide) == 0);
          // The two shapes made for them went to swapped twins of 128 columns where kiln picks
          // the tiles (others of 129 to 512 rows may too, by cost), and never with tiles asked for.
          CHECK(wideLaunches[&gpu()] >= 2);
          CHECK(wideLaunches.count(&r.wide) == 0);
        }
      }
}

TEST_CASE("gpu: the sm_90a twin reads a residual two columns at a time where it is aligned, and right where it is not",
          "[gpu][sm90]") {
  // The residual [M, N] lives in a wider buffer: row stride N (aligned pairs), N + 1 (odd: the
  // careful path), and N with its start one element in (2-byte aligned: the careful path).
  const int64_t M = 300, N = 264, K = 136;
  const bool hopper = gpu().fingerprint().target == "sm_90a";
  CompiledKernel ck = gpu().compile(catalogue::gemm_bias_residual(DType::bf16));
  HostTensor a(DType::bf16, {M, K}), b(DType::bf16, {K, N}), bias(DType::bf16, {N}), r(DType::bf16, {M + 1, N + 1});
  a.fill_random(21);
  b.fill_random(22);
  bias.fill_random(23);
  r.fill_random(24);
  DeviceTensor da = gpu().upload(a), db = gpu().upload(b), dbias = gpu().upload(bias), dr = gpu().upload(r);
  struct Layout {
    const char* what;
    int64_t offset, stride;
  };
  for (const Layout& l : {Layout{"aligned", 0, N}, Layout{"odd row stride", 0, N + 1}, Layout{"one element in", 1, N}}) {
    INFO(l.what);
    HostTensor c(DType::bf16, {M, N});
    c.poison();
    DeviceTensor dc = gpu().upload(c);
    TensorView rv{static_cast<uint16_t*>(dr.view().data) + l.offset, DType::bf16, {M, N}, {l.stride, 1}};
    const std::vector<TensorView> args = {da.view(), db.view(), dbias.view(), rv, dc.view()};
    const std::string path = ck.launch_path(args);
    INFO(path);
    CHECK((path.rfind("sm_90a twin", 0) == 0) == hopper);
    ck.launch(args);
    gpu().download(dc, c);
    TensorView hr{static_cast<uint16_t*>(r.data()) + l.offset, DType::bf16, {M, N}, {l.stride, 1}}, hb = bias.view();
    auto rep = verify::compare(c.view(), reference::gemm(a.view(), b.view(), &hb, reference::Epilogue::bias, &hr),
                               verify::Tolerance::for_dtype(DType::bf16));
    INFO(rep.summary());
    CHECK(rep.ok);
  }
}

TEST_CASE("gpu: the sm_90a twin of two products sharing A (swiglu) is right on ragged shapes, on its tiles only",
          "[gpu][sm90]") {
  // One wgmma computes both products (the gate's columns, then the up's), gated in
  // registers; ragged against C's 128 x 64, 128 x 128 and 64 x 64 tiles. Tiles it cannot take
  // (192 wide, clusters) leave the portable kernel; split-K never cuts it.
  const std::vector<std::vector<int64_t>> shapes = {{1, 8, 8},         {77, 136, 72},   {1000, 1000, 1000},
                                                   {300, 200, 8},     {129, 4096, 264}, {2049, 2056, 136},
                                                   {16, 264, 1024},   {128, 256, 4096}, {3, 200, 1000}};
  const TwinRuntimes& r = twinRuntimes();
  const bool hopper = gpu().fingerprint().target == "sm_90a";
  for (DType d : {DType::bf16, DType::f16})
    DYNAMIC_SECTION("swiglu " << to_string(d)) {
      const catalogue::Entry& e = catalogue::find("swiglu");
      for (const Runtime* rt : {&gpu(), &r.wide, &r.low, &r.splitK, &r.narrow, &r.paired, &r.portable}) {
        CompiledKernel ck = rt->compile(e.make(d));
        INFO(to_string(d) << ": " << ck.report().str());
        const bool twin = hopper && (rt == &gpu() || rt == &r.wide || rt == &r.low || rt == &r.splitK);
        uint64_t seed = 11;
        for (const auto& s : shapes) {
          catalogue::Problem p = e.problem(s, d, seed++);
          catalogue::DeviceProblem dp = catalogue::upload(gpu(), p);
          const std::string path = ck.launch_path(dp.views);
          INFO("shape " << str(s) << ": " << path);
          CHECK((path.rfind("sm_90a twin", 0) == 0) == twin);
          CHECK(path.find("split-K") == std::string::npos);
          ck.launch(dp.views);
          verify::Report rep = catalogue::verify_output(gpu(), dp, p);
          INFO(rep.summary());
          CHECK(rep.ok);
        }
      }
    }
}

TEST_CASE("gpu: attention over a K/V cache splits its keys across a cluster where its CTAs are few, and agrees with the "
          "unsplit twin and the portable kernel", "[gpu][sm90]") {
  // B x H x G x T x S x D: one query of 32 heads against 32k keys (32 CTAs unsplit), GQA
  // at head dim 64 (8), eight and five queries against ragged caches (2), three against a
  // ragged cache at head dim 64, and one too short to split (3 steps). Grouped heads fold
  // into one program: 4 of one query (the D64 GQA one), 4 of 16 queries (64 rows, causal
  // across them), 3 of one at head dim 64 (12 programs of 3 rows).
  const std::vector<std::vector<int64_t>> shapes = {{1, 32, 32, 1, 32768, 128}, {1, 8, 2, 1, 4096, 64},
                                                   {2, 4, 4, 8, 1000, 128},    {1, 2, 2, 5, 700, 128},
                                                   {1, 1, 1, 3, 2053, 64},     {1, 4, 4, 1, 300, 128},
                                                   {1, 32, 8, 16, 2000, 128},  {2, 6, 2, 1, 3000, 64}};
  const bool hopper = gpu().fingerprint().target == "sm_90a";
  Runtime unsplit = Runtime::create(Backend::cuda, {.hopper_split_k = 1});
  Runtime most = Runtime::create(Backend::cuda, {.hopper_split_k = 8});
  const TwinRuntimes& r = twinRuntimes();
  const catalogue::Entry& e = catalogue::find("attention_decode");
  for (DType d : {DType::bf16, DType::f16})
    DYNAMIC_SECTION(to_string(d)) {
      uint64_t seed = 31;
      for (const auto& s : shapes) {
        catalogue::Problem p = e.problem(s, d, seed++);
        for (const Runtime* rt : std::initializer_list<const Runtime*>{&gpu(), &most, &unsplit, &r.portable}) {
          CompiledKernel ck = rt->compile(catalogue::kernel_for(e, d, s, rt->fingerprint().target));
          catalogue::DeviceProblem dp = catalogue::upload(gpu(), p);
          std::string path = ck.launch_path(dp.views);
          INFO(to_string(d) << " " << str(s) << ": " << path);
          const bool split = path.find("key splits in clusters of") != std::string::npos;
          if (rt == &unsplit || rt == &r.portable || !hopper) CHECK_FALSE(split);
          if (hopper && rt == &gpu() && s[1] == 32) CHECK(split); // 32 CTAs alone on 132 SMs
          if (hopper && rt != &r.portable && s[4] == 300) CHECK_FALSE(split); // 3 steps: nothing to cut
          if (hopper && rt == &most && s[4] == 1000) CHECK_THAT(path, Contains("clusters of 2"));
          // A group's query heads whose rows fit one tile: folded (every twin launch).
          const int64_t ratio = s[1] / s[2];
          if (hopper && rt != &r.portable && ratio > 1 && ratio * s[3] <= 64)
            CHECK_THAT(path, Contains(std::to_string(ratio) + " query heads to a program"));
          ck.launch(dp.views);
          verify::Report rep = catalogue::verify_output(gpu(), dp, p);
          INFO(rep.summary());
          CHECK(rep.ok);
        }
      }
    }
}

TEST_CASE("gpu: the sm_90a attention twin is right on ragged shapes, causal and grouped heads, beside the portable kernel", "[gpu][sm90]") {
  // The catalogue's shapes of head dim 64 and 128 (the twin's): one query tile and a CTA's
  // second program absent (S = 1, 77), odd numbers of query tiles, keys ragged past several
  // steps, GQA 4:1 and 2:1, and a sampled long one; short sequences whose grouped heads fold
  // into one program (4 heads of 7 rows, causal; 3 of 20 at head dim 64).
  const std::vector<std::vector<int64_t>> shapes = {{1, 1, 1, 1, 64},   {2, 4, 2, 77, 64},   {1, 2, 2, 129, 128},
                                                   {1, 4, 1, 1000, 128}, {3, 2, 2, 513, 64}, {1, 8, 2, 8200, 128},
                                                   {2, 2, 1, 200, 128},  {2, 8, 2, 7, 128},  {1, 6, 2, 20, 64}};
  const TwinRuntimes& r = twinRuntimes();
  const bool hopper = gpu().fingerprint().target == "sm_90a";
  for (const char* name : {"attention", "attention_causal"})
    for (DType d : {DType::bf16, DType::f16})
      DYNAMIC_SECTION(name << " " << to_string(d)) {
        const catalogue::Entry& e = catalogue::find(name);
        uint64_t seed = 11;
        for (const auto& s : shapes)
          for (const Runtime* rt : {&gpu(), &r.portable}) {
            CompiledKernel ck = rt->compile(catalogue::kernel_for(e, d, s, rt->fingerprint().target));
            catalogue::Problem p = e.problem(s, d, seed++);
            catalogue::DeviceProblem dp = catalogue::upload(gpu(), p);
            std::string path = ck.launch_path(dp.views);
            INFO(name << " " << to_string(d) << " " << str(s) << ": " << path);
            CHECK((path.rfind("sm_90a twin", 0) == 0) == (hopper && rt == &gpu()));
            ck.launch(dp.views);
            verify::Report rep = catalogue::verify_output(gpu(), dp, p);
            INFO(rep.summary());
            CHECK(rep.ok);
          }
      }
}

TEST_CASE("gpu: the sm_90a attention twin writes O at an address 4-byte but not 16-byte aligned, and nothing around it",
          "[gpu][sm90]") {
  // The twin stores O 16 bytes at a time where O's base and strides allow it, else element
  // pairs: here O starts 2 elements into its buffer, poisoned guards on either side.
  const catalogue::Entry& e = catalogue::find("attention_causal");
  for (int64_t D : {64, 128}) {
    const std::vector<int64_t> s = {1, 2, 2, 130, D};
    catalogue::Problem p = e.problem(s, DType::bf16, 23);
    CompiledKernel ck = gpu().compile(catalogue::kernel_for(e, DType::bf16, s, gpu().fingerprint().target));
    catalogue::DeviceProblem dp = catalogue::upload(gpu(), p);
    const int64_t n = dp.views[3].numel();
    HostTensor buffer(DType::bf16, {n + 4});
    buffer.poison();
    DeviceTensor db = gpu().upload(buffer);
    dp.views[3].data = static_cast<uint8_t*>(db.view().data) + 2 * 2;
    const std::string path = ck.launch_path(dp.views);
    INFO("D=" << D << ": " << path);
    if (gpu().fingerprint().target == "sm_90a") CHECK(path.rfind("sm_90a twin", 0) == 0);
    ck.launch(dp.views);
    gpu().download(db, buffer);
    HostTensor o(DType::bf16, dp.views[3].dims);
    for (int64_t i = 0; i < n; ++i) o.set(i, buffer.get(i + 2));
    const verify::Report r = verify::compare(o.view(), p.reference, verify::Tolerance::for_dtype(DType::bf16));
    INFO(r.summary());
    CHECK(r.ok);
    for (int64_t i : {int64_t(0), int64_t(1), n + 2, n + 3}) CHECK(std::isnan(buffer.get(i)));
  }
}

namespace {
/// Launches `ck` on `dp` three times: whether C (bf16) has the same bits each time.
bool sameBitsThrice(const Runtime& rt, CompiledKernel& ck, const catalogue::DeviceProblem& dp,
                    const catalogue::Problem& p) {
  std::vector<std::vector<uint16_t>> runs;
  for (int run = 0; run < 3; ++run) {
    ck.launch(dp.views);
    const TensorView c = dp.views[size_t(p.output)];
    HostTensor out(DType::bf16, c.dims);
    rt.download(dp.tensors[p.output], out);
    const auto* bits = static_cast<const uint16_t*>(out.view().data);
    runs.emplace_back(bits, bits + out.view().numel());
  }
  return runs[1] == runs[0] && runs[2] == runs[0];
}
} // namespace

TEST_CASE("gpu: split-K gives the same bits on every run, and its workspace is counted", "[gpu][sm90]") {
  if (gpu().fingerprint().target != "sm_90a") {
    WARN("not run: split-K is the sm_90a twin's, and this GPU is " << gpu().fingerprint().target);
    return;
  }
  ScopedEnv on("KILN_HOPPER_SPLIT_K", "on");
  Runtime rt = Runtime::create(Backend::cuda, {.hopper_cluster = 1}); // clustered twins take whole tiles
  // 1000^3: 64 tiles of 16 k-steps cut in halves; 128 x 12288 x 1024: 96 tiles in chunks;
  // 2176 x 4096 x 512: whole rounds of tiles first, then the rest in chunks (a CTA's ring
  // carried from its whole tiles into its chunks). (The decode twin splits in clusters: below.)
  for (const std::vector<int64_t>& s : {std::vector<int64_t>{1000, 1000, 1000}, {128, 12288, 1024}, {2176, 4096, 512}}) {
    CompiledKernel ck = rt.compile(catalogue::gemm_bias_relu(DType::bf16));
    catalogue::Problem p = catalogue::find("gemm_bias_relu").problem(s, DType::bf16, 11);
    catalogue::DeviceProblem dp = catalogue::upload(rt, p);
    std::string path = ck.launch_path(dp.views);
    INFO(str(s) << ": " << path);
    // "... (132 CTAs, split-K: the last 96 tiles cut along K into 4 chunks)"
    long splitTiles = 0, chunks = 0;
    const size_t at = path.find("split-K: the last ");
    REQUIRE(at != std::string::npos);
    REQUIRE(std::sscanf(path.c_str() + at, "split-K: the last %ld tiles cut along K into %ld chunks", &splitTiles,
                        &chunks) == 2);
    const int64_t tileN = path.find("__sm90_n256") != std::string::npos   ? 256
                          : path.find("__sm90_n192") != std::string::npos ? 192
                                                                          : 128;
    const int64_t tileM = path.find("__sm90_m64") != std::string::npos ? 64 : 128;
    const int64_t tiles = (s[0] + tileM - 1) / tileM * ((s[1] + tileN - 1) / tileN);
    if (s[0] == 2176) CHECK(splitTiles < tiles);
    else CHECK(splitTiles == tiles);
    CHECK(sameBitsThrice(rt, ck, dp, p));
    // The workspace (arrival counters, then a slot of tileM x tileN f32 per chunk) is device
    // memory kiln holds beside the problem's tensors: made by the first split-K launch,
    // grown when a launch needs more.
    int64_t tensorBytes = 0;
    for (const TensorView& v : dp.views) tensorBytes += v.numel() * 2;
    CHECK(rt.memory().in_use_bytes >= tensorBytes + 64 * 1024 + int64_t(splitTiles) * chunks * tileM * tileN * 4);
    verify::Report r = catalogue::verify_output(rt, dp, p);
    INFO(r.summary());
    CHECK(r.ok);
  }
}

TEST_CASE("gpu: the decode twin's K-clusters give the same bits on every run and allocate nothing", "[gpu][sm90]") {
  if (gpu().fingerprint().target != "sm_90a") {
    WARN("not run: the decode twin is the sm_90a twin's, and this GPU is " << gpu().fingerprint().target);
    return;
  }
  struct Case {
    std::vector<int64_t> shape;
    int splitK; // RuntimeOptions::hopper_split_k
    int cluster; // the launch's K-cluster (0: whole tiles)
    const char* entry;
  };
  // kiln's choice: 64 tiles in pairs; 33 ragged tiles (N = 2056) of 16 k-steps in pairs; 32
  // tiles in fours; a 32-row tile of C with 17 rows in pairs. Asked for: more tiles than
  // clusters (each cluster takes several in turn: rank 0 frees its peers' slots between
  // them, and the barriers' phases flip), in pairs and in fours, the 4 chunks of 1000's 16
  // k-steps ragged; whole tiles where asked for none.
  const std::vector<Case> cases = {{{16, 4096, 4096}, 0, 2, "__sm90_dec'"},  {{3, 2056, 1000}, 0, 2, "__sm90_dec'"},
                                   {{4, 2048, 4096}, 0, 4, "__sm90_dec'"},   {{17, 4096, 1032}, 0, 2, "__sm90_dec32'"},
                                   {{16, 16384, 1024}, 2, 2, "__sm90_dec'"}, {{32, 12296, 1000}, 4, 4, "__sm90_dec32'"},
                                   {{9, 8200, 2048}, 4, 4, "__sm90_dec'"},   {{16, 4096, 4096}, 1, 0, "__sm90_dec'"}};
  for (const Case& c : cases) {
    const std::vector<int64_t>& s = c.shape;
    Runtime rt = Runtime::create(Backend::cuda, {.hopper_split_k = c.splitK});
    CompiledKernel ck = rt.compile(catalogue::gemm_bias_relu(DType::bf16));
    catalogue::Problem p = catalogue::find("gemm_bias_relu").problem(s, DType::bf16, 13);
    catalogue::DeviceProblem dp = catalogue::upload(rt, p);
    std::string path = ck.launch_path(dp.views);
    INFO(str(s) << " hopper_split_k " << c.splitK << ": " << path);
    CHECK_THAT(path, Contains(c.entry));
    if (c.cluster)
      CHECK_THAT(path, Contains("split-K in clusters of " + std::to_string(c.cluster) + ":"));
    else
      CHECK_THAT(path, !Contains("split-K"));
    const int64_t before = rt.memory().in_use_bytes;
    CHECK(sameBitsThrice(rt, ck, dp, p));
    // The partial sums go through shared memory: no workspace.
    CHECK(rt.memory().in_use_bytes == before);
    verify::Report r = catalogue::verify_output(rt, dp, p);
    INFO(r.summary());
    CHECK(r.ok);
  }
}

TEST_CASE("gpu: a GEMM problem's cuBLASLt reference agrees with the f64 host reference", "[gpu][cublas]") {
  // What kiln bench verifies against above 2^33 multiply-adds, checked where both exist.
  for (const char* name : {"gemm", "gemm_bias_relu", "gemm_bias_gelu", "gemm_bias_residual"})
    for (DType d : {DType::bf16, DType::f16}) {
      INFO(name << " " << to_string(d));
      const catalogue::Entry& e = catalogue::find(name);
      catalogue::Problem host = e.problem({257, 136, 520}, d, 5);
      catalogue::Problem gpuRef = e.gpu_problem(gpu(), {257, 136, 520}, d, 5);
      REQUIRE(gpuRef.reference.size() == host.reference.size());
      HostTensor asTensor(DType::f32, {257, 136});
      for (size_t i = 0; i < gpuRef.reference.size(); ++i) asTensor.set(int64_t(i), float(gpuRef.reference[i]));
      verify::Report r = verify::compare(asTensor.view(), host.reference, verify::Tolerance::for_dtype(d));
      INFO(r.summary());
      CHECK(r.ok);
    }
}

TEST_CASE("gpu: the twin reads and writes through padded row strides, odd N included", "[gpu][sm90]") {
  // A, B and C inside larger allocations: with 16-byte pitches and C's rows a multiple of
  // 16 bytes the twin runs (its TMA store writes whole 16-byte units), and C's padding is
  // left alone; otherwise (an odd N, a pitch of 146 elements) the launch goes to the
  // portable kernel, with the same result. At 300 rows (padded by 128-row tiles) a swapped
  // twin of 128 columns takes it, which stores C from registers: on any pitch.
  const int64_t K = 72, kLdb = 152; // B's pitch: 304 bytes, past either N
  for (int64_t M : {300, 520})
  for (auto [N, ldc] : {std::pair<int64_t, int64_t>{136, 144}, {136, 146}, {135, 144}}) {
    const bool twin = M == 300 || (N % 8 == 0 && ldc % 8 == 0);
    HostTensor a(DType::bf16, {M, K + 8}), b(DType::bf16, {K, kLdb}), bias(DType::bf16, {N}), c(DType::bf16, {M, ldc});
    a.fill_random(1), b.fill_random(2), bias.fill_random(3);
    c.poison();
    DeviceTensor da = gpu().upload(a), db = gpu().upload(b), dbias = gpu().upload(bias), dc = gpu().upload(c);
    TensorView va{da.view().data, DType::bf16, {M, K}, {K + 8, 1}}, vb{db.view().data, DType::bf16, {K, N}, {kLdb, 1}};
    TensorView vc{dc.view().data, DType::bf16, {M, N}, {ldc, 1}};
    CompiledKernel ck = gpu().compile(catalogue::gemm_bias_relu(DType::bf16));
    std::string path = ck.launch_path({va, vb, dbias.view(), vc});
    INFO("M " << M << ", ldc " << ldc << ": " << path);
    if (gpu().fingerprint().target == "sm_90a") CHECK((path.rfind("sm_90a twin", 0) == 0) == twin);
    ck.launch({va, vb, dbias.view(), vc});
    HostTensor out(DType::bf16, {M, ldc});
    gpu().download(dc, out);
    HostTensor ha(DType::bf16, {M, K}), hb(DType::bf16, {K, N});
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k) ha.set(i * K + k, a.get(i * (K + 8) + k));
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) hb.set(k * N + j, b.get(k * (kLdb) + j));
    TensorView vbias = bias.view();
    std::vector<double> want = reference::gemm(ha.view(), hb.view(), &vbias, reference::Epilogue::bias_relu);
    HostTensor got(DType::bf16, {M, N});
    int padTouched = 0;
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) got.set(i * N + j, out.get(i * ldc + j));
      for (int64_t j = N; j < ldc; ++j) padTouched += !std::isnan(out.get(i * ldc + j));
    }
    verify::Report r = verify::compare(got.view(), want, verify::Tolerance::for_dtype(DType::bf16));
    INFO(r.summary());
    CHECK(r.ok);
    CHECK(padTouched == 0); // the padding keeps its poison
  }
}

TEST_CASE("gpu: launches of one kernel over different buffers of one shape each read and write their own, and verify",
          "[gpu][sm90][launch]") {
  // A launch keeps the tensor maps it encoded and the twin it chose for the next launch of
  // equal views: buffers at other addresses must get maps of their own (a map kept for the
  // first problem's would read its A and B and write its C, leaving these outputs poisoned).
  const catalogue::Entry& entry = catalogue::find("gemm_bias_relu");
  CompiledKernel ck = gpu().compile(catalogue::gemm_bias_relu(DType::bf16));
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{256, 256, 128}, {16, 512, 256}}) {
    std::vector<catalogue::Problem> problems;
    std::vector<catalogue::DeviceProblem> buffers;
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      problems.push_back(entry.problem(shape, DType::bf16, seed));
      problems.back().poison_outputs();
      buffers.push_back(catalogue::upload(gpu(), problems.back()));
    }
    for (int round = 0; round < 2; ++round) // the second round in reverse: every map already kept
      for (size_t n = 0; n < problems.size(); ++n) {
        const size_t i = round == 0 ? n : problems.size() - 1 - n;
        INFO(str(shape) << ", round " << round << ", problem " << i << ": " << ck.launch_path(buffers[i].views));
        if (gpu().fingerprint().target == "sm_90a") CHECK(ck.launch_path(buffers[i].views).rfind("sm_90a twin", 0) == 0);
        if (round == 1) { // a poisoned output again, in new buffers (the freed addresses may come back)
          problems[i].poison_outputs();
          buffers[i] = catalogue::upload(gpu(), problems[i]);
        }
        ck.launch(buffers[i].views);
        const verify::Report r = catalogue::verify_output(gpu(), buffers[i], problems[i]);
        INFO(r.summary());
        CHECK(r.ok);
      }
  }
}

TEST_CASE("gpu: one kernel reads one buffer through two row pitches, each through its own tensor map", "[gpu][sm90][launch]") {
  // A kept tensor map is found by address, extents, pitches and box: the same A buffer read
  // as 256 consecutive rows, then as 256 rows a step of two apart (the same address, extents
  // and twin: only the pitch differs), must not reuse the first map.
  const int64_t rows = 256, N = 128, K = 64, lda = K + 8;
  HostTensor a(DType::bf16, {2 * rows, lda}), b(DType::bf16, {K, N}), bias(DType::bf16, {N});
  a.fill_random(31), b.fill_random(32), bias.fill_random(33);
  DeviceTensor da = gpu().upload(a), db = gpu().upload(b), dbias = gpu().upload(bias);
  CompiledKernel ck = gpu().compile(catalogue::gemm_bias_relu(DType::bf16));
  std::string firstPath;
  for (int64_t step : {1, 2, 1}) { // consecutive rows, every other row, consecutive again
    HostTensor c(DType::bf16, {rows, N});
    c.poison();
    DeviceTensor dc = gpu().upload(c);
    TensorView va{da.view().data, DType::bf16, {rows, K}, {step * lda, 1}};
    const std::string path = ck.launch_path({va, db.view(), dbias.view(), dc.view()});
    INFO("a step of " << step << " row(s): " << path);
    if (gpu().fingerprint().target == "sm_90a") CHECK(path.rfind("sm_90a twin", 0) == 0);
    if (firstPath.empty()) firstPath = path;
    CHECK(path == firstPath); // one twin, one box: only the pitch tells the maps apart
    ck.launch({va, db.view(), dbias.view(), dc.view()});
    gpu().download(dc, c);
    HostTensor ha(DType::bf16, {rows, K});
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t k = 0; k < K; ++k) ha.set(i * K + k, a.get(i * step * lda + k));
    TensorView vbias = bias.view();
    std::vector<double> want = reference::gemm(ha.view(), b.view(), &vbias, reference::Epilogue::bias_relu);
    verify::Report r = verify::compare(c.view(), want, verify::Tolerance::for_dtype(DType::bf16));
    INFO(r.summary());
    CHECK(r.ok);
  }
}

TEST_CASE("gpu: a bf16 GEMM with an f32 output is right through the twin", "[gpu][sm90]") {
  Kernel k = test::bf16Gemm("to_f32", {}, DType::f32);
  CompiledKernel ck = gpu().compile(k);
  for (std::vector<int64_t> s : {std::vector<int64_t>{77, 135, 72}, {300, 264, 520}}) {
    const int64_t M = s[0], N = s[1], K = s[2];
    HostTensor a(DType::bf16, {M, K}), b(DType::bf16, {K, N}), c(DType::f32, {M, N});
    a.fill_random(11), b.fill_random(12);
    c.poison();
    DeviceTensor da = gpu().upload(a), db = gpu().upload(b), dc = gpu().upload(c);
    INFO(str(s) << ": " << ck.launch_path({da.view(), db.view(), dc.view()}));
    ck.launch({da.view(), db.view(), dc.view()});
    gpu().download(dc, c);
    std::vector<double> want = reference::gemm(a.view(), b.view(), nullptr, reference::Epilogue::none);
    verify::Report r = verify::compare(c.view(), want, verify::Tolerance::for_dtype(DType::f32));
    INFO(r.summary());
    CHECK(r.ok);
  }
}

TEST_CASE("gpu: random DSL programs agree with a direct evaluation of the same expression", "[gpu][random]") {
  // The CPU suite's differential (test/random_programs.hpp), on the CUDA lowering.
  std::mt19937_64 rng(20261203);
  const std::function<uint64_t()> next = [&] { return rng(); };
  const int64_t tileRows[] = {1, 4, 8, 16}, tileCols[] = {8, 16, 32, 64};
  for (int program = 0; program < 24; ++program) {
    std::shared_ptr<random_programs::Node> tree = random_programs::randomTree(next, 4);
    const int64_t tm = tileRows[rng() % 4], tn = tileCols[rng() % 4];
    const int64_t M = 1 + int64_t(rng() % 40), N = 1 + int64_t(rng() % 90);
    INFO("program " << program << ": " << random_programs::show(*tree) << " on " << M << "x" << N << ", tiles " << tm
                    << "x" << tn);
    HostTensor x(DType::f32, {M, N}), y(DType::f32, {M, N});
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    for (int64_t i = 0; i < M * N; ++i) x.set(i, u(rng)), y.set(i, u(rng));
    double worst = 0;
    const int bad = random_programs::compareWithEval(gpu(), *tree, tm, tn, x, y, "random_" + std::to_string(program), worst);
    INFO("worst relative error " << worst);
    CHECK(bad == 0);
  }
}

TEST_CASE("gpu: kernels that declare it run in place and verify, the twin's residual epilogue included", "[gpu][launch]") {
  // Each case: the catalogue problem, the output's index and the input it is written over.
  struct Case {
    const char* kernel;
    std::vector<int64_t> shape;
    DType dtype;
    size_t out, over;
  };
  for (const Case& c : {Case{"add", {37, 300}, DType::bf16, 2, 0}, Case{"softmax", {9, 3000}, DType::f16, 1, 0},
                        Case{"rmsnorm", {33, 1000}, DType::bf16, 2, 0},
                        Case{"gemm_bias_residual", {256, 256, 512}, DType::bf16, 4, 3},    // the sm_90a twin
                        // Its last row (column) of tiles moved up (left) inside A (B): it must not
                        // write the rows above or the columns left of its own (another tile's, whose
                        // residual is read in place).
                        Case{"gemm_bias_residual", {2049, 2056, 136}, DType::bf16, 4, 3},
                        Case{"gemm_bias_residual", {257, 129, 65}, DType::f16, 4, 3}}) { // the portable kernel
    INFO(c.kernel << " " << str(c.shape));
    catalogue::Problem p = catalogue::find(c.kernel).problem(c.shape, c.dtype, 31);
    catalogue::DeviceProblem d = catalogue::upload(gpu(), p);
    std::vector<TensorView> views = d.views;
    views[c.out] = views[c.over];
    CompiledKernel ck = gpu().compile(catalogue::find(c.kernel).make(c.dtype));
    INFO(ck.launch_path(views));
    ck.launch(views);
    gpu().synchronize();
    HostTensor got(c.dtype, views[c.over].dims);
    gpu().download(d.tensors[c.over], got);
    CHECK(verify::compare(got.view(), p.reference, verify::Tolerance::for_dtype(c.dtype)).ok);
  }
}

TEST_CASE("gpu: attention's log-sum-exp output is right from the twin, split or not, and from the portable kernel",
          "[gpu][sm90]") {
  // Prefill (B x H x G x S x D): ragged S, grouped heads, head dims 128 and 64. Decode
  // (B x H x G x T x S x D): one query of 32 heads in 8 groups (heads folded, keys split),
  // 32 heads at head dim 64 (keys split), five queries against a ragged cache.
  const bool hopper = gpu().fingerprint().target == "sm_90a";
  Runtime unsplit = Runtime::create(Backend::cuda, {.hopper_split_k = 1});
  const TwinRuntimes& r = twinRuntimes();
  const std::vector<std::pair<const char*, std::vector<int64_t>>> cases = {
      {"attention_lse", {2, 4, 2, 300, 128}},        {"attention_lse", {1, 2, 2, 1000, 64}},
      {"attention_causal_lse", {2, 4, 2, 300, 128}}, {"attention_causal_lse", {1, 2, 2, 1000, 64}},
      {"attention_decode_lse", {1, 32, 8, 1, 8192, 128}}, {"attention_decode_lse", {1, 32, 32, 1, 16384, 64}},
      {"attention_decode_lse", {2, 4, 4, 5, 700, 128}}};
  for (DType d : {DType::bf16, DType::f16})
    for (const Runtime* rt : std::initializer_list<const Runtime*>{&gpu(), &unsplit, &r.portable}) {
      const bool twin = hopper && rt != &r.portable;
      uint64_t seed = 50;
      for (const auto& [name, s] : cases) {
        const catalogue::Entry& e = catalogue::find(name);
        catalogue::Problem p = e.problem(s, d, seed++);
        REQUIRE(p.more_outputs.size() == 1);
        CompiledKernel ck = rt->compile(catalogue::kernel_for(e, d, s, rt->fingerprint().target));
        catalogue::DeviceProblem dp = catalogue::upload(gpu(), p);
        const std::string path = ck.launch_path(dp.views);
        INFO(name << " " << to_string(d) << " " << str(s) << ": " << path);
        if (twin) CHECK(path.rfind("sm_90a twin", 0) == 0);
        if (twin && s[1] == 32) CHECK((path.find("key splits in clusters") != std::string::npos) == (rt == &gpu()));
        if (twin && s.size() == 6 && s[2] == 8) CHECK_THAT(path, Contains("4 query heads to a program"));
        ck.launch(dp.views);
        verify::Report rep = catalogue::verify_output(gpu(), dp, p);
        INFO(rep.summary());
        CHECK(rep.ok);
      }
    }
}
