// The framework's attention: cuDNN's fused flash attention (reference::gpu_attention) on the
// same device inputs as kiln's attention kernels. cuDNN must agree with the f64 host
// reference (its log-sum-exp too), and kiln with cuDNN, under the dtype's tolerance.
#include <catch2/catch.hpp>

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

bool causalEntry(const std::string& name) {
  return name.find("causal") != std::string::npos || name.find("decode") != std::string::npos;
}

} // namespace

TEST_CASE("gpu: cuDNN's attention agrees with the f64 reference, log-sum-exp included, and kiln's agrees with cuDNN",
          "[gpu][cudnn]") {
  // Prefill B x H x G x S x D and decode B x H x G x T x S x D: ragged lengths, grouped
  // heads, head dims 32, 64 and 128, queries at the end of a longer cache.
  const std::vector<std::pair<const char*, std::vector<int64_t>>> cases = {
      {"attention", {1, 4, 2, 200, 64}},           {"attention_causal", {1, 2, 1, 130, 32}},
      {"attention_lse", {1, 2, 2, 1000, 64}},      {"attention_causal_lse", {2, 4, 4, 300, 128}},
      {"attention_decode_lse", {2, 4, 4, 5, 700, 128}}, {"attention_decode", {1, 32, 8, 1, 8192, 128}}};
  for (DType d : {DType::bf16, DType::f16}) {
    uint64_t seed = 70;
    for (const auto& [name, s] : cases) {
      const catalogue::Entry& e = catalogue::find(name);
      catalogue::Problem p = e.problem(s, d, seed++);
      INFO(name << " " << to_string(d) << " " << str(s));

      CompiledKernel ck = gpu().compile(catalogue::kernel_for(e, d, s, gpu().fingerprint().target));
      catalogue::DeviceProblem dk = catalogue::upload(gpu(), p);
      ck.launch(dk.views);
      HostTensor kilnO(d, p.args[p.output].dims());
      gpu().download(dk.tensors[p.output], kilnO);

      p.poison_outputs();
      catalogue::DeviceProblem dc = catalogue::upload(gpu(), p);
      const TensorView* lse = p.more_outputs.empty() ? nullptr : &dc.views[4];
      reference::gpu_attention(gpu(), dc.views[0], dc.views[1], dc.views[2], causalEntry(name), dc.views[3], lse);
      for (const verify::Report& r : catalogue::verify_outputs(gpu(), dc, p)) {
        INFO("cuDNN vs f64: " << r.summary());
        CHECK(r.ok);
      }
      const verify::Report kilnVsCudnn =
          verify::compare(kilnO.view(), p.args[p.output].to_f64(), verify::Tolerance::for_dtype(d));
      INFO("kiln vs cuDNN: " << kilnVsCudnn.summary());
      CHECK(kilnVsCudnn.ok);
    }
  }
}

TEST_CASE("gpu: cuDNN's padded attention agrees with the f64 reference on every sequence's rows, the large "
          "padding masked",
          "[gpu][cudnn]") {
  // The catalogue's padded problems: lengths drawn in 1 .. S, K and V a thousand times
  // larger past each length; only the sequences' rows are checked. Head dims 64 and 128,
  // grouped heads, causal.
  const std::vector<std::pair<const char*, std::vector<int64_t>>> cases = {
      {"attention_padded", {3, 4, 2, 200, 64}},
      {"attention_padded_causal", {4, 4, 4, 333, 128}},
      {"attention_padded_causal", {2, 8, 2, 1024, 64}}};
  for (DType d : {DType::bf16, DType::f16}) {
    uint64_t seed = 90;
    for (const auto& [name, s] : cases) {
      const catalogue::Entry& e = catalogue::find(name);
      REQUIRE(e.framework);
      catalogue::Problem p = e.problem(s, d, seed++);
      INFO(name << " " << to_string(d) << " " << str(s));
      catalogue::DeviceProblem dc = catalogue::upload(gpu(), p);
      reference::gpu_attention_padded(gpu(), dc.views[0], dc.views[1], dc.views[2], dc.views[3],
                                      name == std::string("attention_padded_causal"), dc.views[4]);
      for (const verify::Report& r : catalogue::verify_outputs(gpu(), dc, p)) {
        INFO("cuDNN vs f64: " << r.summary());
        CHECK(r.ok);
      }
    }
  }
}

TEST_CASE("gpu: cuDNN's attention reads and writes the [B, T, H, D] layout through strides", "[gpu][cudnn]") {
  // Engines keep Q and O token-major ([B, T, H, D]); the view [B, H, T, D] over that memory
  // has strides {T H D, D, H D, 1}. K and V stay head-major.
  const int64_t B = 2, H = 4, G = 2, T = 96, D = 64;
  const DType dt = DType::bf16;
  HostTensor q(dt, {B, T, H, D}), k(dt, {B, G, T, D}), v(dt, {B, G, T, D}), o(dt, {B, T, H, D});
  q.fill_random(1);
  k.fill_random(2);
  v.fill_random(3);
  o.poison();
  const std::vector<int64_t> tokenMajor = {T * H * D, D, H * D, 1};
  const TensorView qHost{q.data(), dt, {B, H, T, D}, tokenMajor};
  const std::vector<double> want = reference::attention(qHost, k.view(), v.view(), /*causal=*/true);

  DeviceTensor dq = gpu().upload(q), dk = gpu().upload(k), dv = gpu().upload(v), dOut = gpu().upload(o);
  const TensorView qView{dq.view().data, dt, {B, H, T, D}, tokenMajor};
  const TensorView oView{dOut.view().data, dt, {B, H, T, D}, tokenMajor};
  reference::gpu_attention(gpu(), qView, dk.view(), dv.view(), true, oView);
  gpu().download(dOut, o);
  HostTensor got(dt, {B, H, T, D}); // back to [B, H, T, D] order, the reference's
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t x = 0; x < D; ++x)
          got.set(((b * H + h) * T + t) * D + x, o.get(((b * T + t) * H + h) * D + x));
  const verify::Report r = verify::compare(got.view(), want, verify::Tolerance::for_dtype(dt));
  INFO(r.summary());
  CHECK(r.ok);
}

TEST_CASE("gpu: gpu_attention refuses host memory, naming the argument", "[gpu][cudnn]") {
  HostTensor q(DType::bf16, {1, 2, 8, 64}), o(DType::bf16, {1, 2, 8, 64});
  DeviceTensor dq = gpu().upload(q), dOut = gpu().upload(o);
  try {
    reference::gpu_attention(gpu(), dq.view(), q.view(), dq.view(), false, dOut.view());
    FAIL("expected kiln::Error");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.kind() == ErrorKind::InvalidArgument);
    CHECK_THAT(std::string(e.what()), Contains("argument 'K'"));
  }
}
