// The framework's attention: cuDNN's fused flash attention (reference::gpu_attention) on the
// same device inputs as kiln's attention kernels. cuDNN must agree with the f64 host
// reference (its log-sum-exp too), and kiln with cuDNN, under the dtype's tolerance.
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

TEST_CASE("gpu: cuDNN's packed attention agrees with the f64 reference on every sequence, head-major or token-major",
          "[gpu][cudnn]") {
  // The catalogue's packed problems (sequences end to end, lengths drawn in 1 .. S, grouped
  // heads): through the entry's framework route for the shape (max_len = S), and again with
  // Q, K, V and O token-major ([T, heads, D] memory, as engines keep them) viewed as
  // [heads, T, D] through strides.
  const std::vector<std::pair<const char*, std::vector<int64_t>>> cases = {
      {"attention_packed", {3, 4, 2, 200, 64}},
      {"attention_packed_causal", {4, 4, 4, 333, 128}},
      {"attention_packed_causal", {5, 8, 2, 700, 64}}};
  for (DType d : {DType::bf16, DType::f16}) {
    uint64_t seed = 190;
    for (const auto& [name, s] : cases) {
      const catalogue::Entry& e = catalogue::find(name);
      const auto framework = catalogue::framework_for(e, s);
      REQUIRE(framework);
      catalogue::Problem p = e.problem(s, d, seed++);
      INFO(name << " " << to_string(d) << " " << str(s));
      {
        catalogue::DeviceProblem dc = catalogue::upload(gpu(), p);
        framework(gpu(), dc.views, nullptr);
        for (const verify::Report& r : catalogue::verify_outputs(gpu(), dc, p)) {
          INFO("cuDNN (head-major) vs f64: " << r.summary());
          CHECK(r.ok);
        }
      }
      // Token-major copies: element (h, t, x) of [heads, T, D] at (t heads + h) D + x.
      const int64_t T = p.args[0].dims()[1], D = p.args[0].dims()[2];
      auto tokenMajor = [&](const HostTensor& t) {
        const int64_t heads = t.dims()[0];
        HostTensor out(t.dtype(), {T, heads, D});
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t i = 0; i < T; ++i)
            for (int64_t x = 0; x < D; ++x) out.set((i * heads + h) * D + x, t.get((h * T + i) * D + x));
        return out;
      };
      std::vector<DeviceTensor> keep;
      std::vector<TensorView> views;
      for (size_t a : {size_t(0), size_t(1), size_t(2), size_t(4)}) {
        const int64_t heads = p.args[a].dims()[0];
        HostTensor t = a == 4 ? HostTensor(d, {T, heads, D}) : tokenMajor(p.args[a]);
        if (a == 4) t.poison();
        keep.push_back(gpu().upload(t));
        views.push_back({keep.back().view().data, d, {heads, T, D}, {D, heads * D, 1}});
      }
      const DeviceTensor off = gpu().upload(p.args[3]);
      reference::gpu_attention_packed(gpu(), views[0], views[1], views[2], off.view(), s[3],
                                      name == std::string("attention_packed_causal"), views[3]);
      const int64_t H = p.args[0].dims()[0];
      HostTensor got(d, {T, H, D}), back(d, {H, T, D});
      gpu().download(keep[3], got);
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T; ++i)
          for (int64_t x = 0; x < D; ++x) back.set((h * T + i) * D + x, got.get((i * H + h) * D + x));
      HostTensor sel = back; // the checked elements only, where the problem samples them
      if (!p.checked.empty()) {
        sel = HostTensor(d, {int64_t(p.checked.size())});
        for (size_t i = 0; i < p.checked.size(); ++i) sel.set(int64_t(i), back.get(p.checked[i]));
      }
      const verify::Report r = verify::compare(sel.view(), p.reference, verify::Tolerance::for_dtype(d));
      INFO("cuDNN (token-major) vs f64: " << r.summary());
      CHECK(r.ok);
    }
  }
}

TEST_CASE("gpu: cuDNN's packed attention leaves rows outside every sequence alone and clamps offsets past the tokens",
          "[gpu][cudnn]") {
  // Tokens 0-1 and 20-23 belong to no sequence; the second sequence is empty; the last
  // offset lies past T (clamped to T = 24: the third sequence is tokens 10 .. 23, and max_len
  // 10 keeps its first 10 rows, 10 .. 19). What is computed matches the f64 reference.
  const int64_t H = 4, G = 2, T = 24, D = 64;
  const DType dt = DType::bf16;
  HostTensor q(dt, {H, T, D}), k(dt, {G, T, D}), v(dt, {G, T, D}), o(dt, {H, T, D}), off(DType::i32, {4});
  q.fill_random(7);
  k.fill_random(8);
  v.fill_random(9);
  o.poison();
  const std::vector<int64_t> starts = {2, 10, 10, 1000};
  for (size_t i = 0; i < starts.size(); ++i) off.set(int64_t(i), float(starts[i]));
  DeviceTensor dq = gpu().upload(q), dk = gpu().upload(k), dv = gpu().upload(v), dOut = gpu().upload(o),
               dOff = gpu().upload(off);
  reference::gpu_attention_packed(gpu(), dq.view(), dk.view(), dv.view(), dOff.view(), /*max_len=*/10, true,
                                  dOut.view());
  gpu().download(dOut, o);
  auto seq = [&](HostTensor& t, int64_t heads, int64_t first, int64_t len) {
    return TensorView{static_cast<uint8_t*>(t.data()) + first * D * 2, dt, {1, heads, len, D}, {heads * T * D, T * D, D, 1}};
  };
  for (const auto& [first, len] : {std::pair<int64_t, int64_t>{2, 8}, {10, 10}}) {
    const std::vector<double> want = reference::attention(seq(q, H, first, len), seq(k, G, first, len),
                                                          seq(v, G, first, len), /*causal=*/true);
    const verify::Report r = verify::compare(seq(o, H, first, len), want, verify::Tolerance::for_dtype(dt));
    INFO("sequence at " << first << ": " << r.summary());
    CHECK(r.ok);
  }
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t : {0, 1, 20, 21, 22, 23}) {
      INFO("head " << h << " token " << t);
      CHECK(std::isnan(o.get((h * T + t) * D)));
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
