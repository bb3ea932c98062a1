#pragma once
// The CPU backend's dtype suite, run by test_cpu_backend.cpp on the host's own CPU and by
// test_cpu_targets.cpp on forced baseline CPUs: every catalogue kernel in every dtype on
// ragged shapes, bf16 reductions, and every conversion on the values where rounding is
// hard (ties, subnormals, overflow, NaN).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kiln/catalogue.hpp"
#include "kiln/dsl.hpp"
#include "kiln/runtime.hpp"
#include "kiln/verify.hpp"

namespace kiln::test {

// 1, 7, 127, 129 and 1000 each appear as M, N and K; none is a multiple of the default
// tiles (64x64x32 for GEMMs, 4x256 for row kernels).
inline const std::vector<std::vector<int64_t>> kGemmShapes = {
    {1, 1, 1}, {7, 127, 129}, {129, 7, 1000}, {127, 1000, 7}, {1000, 129, 127}, {65, 63, 33}};
inline const std::vector<std::vector<int64_t>> kRowShapes = {
    {1, 1}, {7, 1000}, {129, 127}, {1000, 129}, {127, 7}, {5, 257}, {3, 4097}};

/// B x H x G x S x D: one head and one row, GQA 2:1, a ragged S past one key tile, G = H. One
/// head dim (the kernel is built per D; the H200 suite covers 32, 64 and 128).
inline const std::vector<std::vector<int64_t>> kAttentionShapes = {
    {1, 1, 1, 1, 32}, {2, 4, 2, 37, 32}, {1, 2, 1, 70, 32}, {1, 3, 3, 65, 32}};

/// B x H x G x T x S x D (T queries, the last of S positions): T = S = 1, one new query over a
/// ragged cache with GQA 2:1, five queries across a key tile's edge, T = S (the causal
/// kernel's case), and queries that fill more than one query tile of the f32 kernel.
inline const std::vector<std::vector<int64_t>> kDecodeShapes = {
    {1, 1, 1, 1, 1, 32}, {2, 4, 2, 1, 37, 32}, {1, 2, 1, 5, 70, 32}, {1, 3, 3, 20, 20, 32}, {1, 2, 2, 19, 83, 32}};

/// T x H x D for rope: one token and head, heads not a multiple of a program's 8, many
/// tokens. One head dim (the kernel is built per D).
inline const std::vector<std::vector<int64_t>> kRopeShapes = {{1, 1, 64}, {7, 3, 64}, {33, 9, 64}, {130, 17, 64}};

inline const std::vector<std::vector<int64_t>>& shapesFor(const catalogue::Entry& e) {
  if (e.name == "rope") return kRopeShapes;
  return e.shape_rank == 6   ? kDecodeShapes
         : e.shape_rank == 5 ? kAttentionShapes
         : e.shape_rank == 3 ? kGemmShapes
                             : kRowShapes;
}

inline std::string str(const std::vector<int64_t>& s) {
  std::string t;
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "x" : "") + std::to_string(s[i]);
  return t;
}

inline void checkEntryOnShapes(const Runtime& rt, const catalogue::Entry& e, DType dt) {
  const auto& shapes = shapesFor(e);
  // One compile serves every shape: dims and strides are launch values (and the shapes
  // agree on what a specialised kernel is built for).
  CompiledKernel ck = rt.compile(catalogue::kernel_for(e, dt, shapes[0], rt.fingerprint().target));
  uint64_t seed = 1;
  for (const auto& s : shapes) {
    catalogue::Problem p = e.problem(s, dt, seed++);
    // Small enough for the whole reference; a padded problem's lists the sequences' elements
    // (its padding rows are not results).
    REQUIRE((p.checked.empty() || p.checked.size() == p.reference.size()));
    // The catalogue's own verification: each output against its reference, through the
    // elements `checked` lists where it lists them.
    catalogue::DeviceProblem d = catalogue::upload(rt, p);
    ck.launch(d.views);
    for (const catalogue::Problem::More& m : p.more_outputs) REQUIRE(m.checked.empty()); // attention's LSE
    for (const verify::Report& rep : catalogue::verify_outputs(rt, d, p)) {
      INFO(e.name << " " << to_string(dt) << " shape " << str(s) << " on " << rt.describe() << ": "
                  << (rep.output.empty() ? "" : rep.output + ": ") << rep.summary());
      CHECK(rep.ok);
    }
  }
}

/// 300 ones summed from bf16: a bf16 running sum would stall at 256 (257 is not
/// representable), an f32 one reaches 300.
inline void checkBf16SumAccumulatesInF32(const Runtime& rt) {
  using namespace kiln::dsl;
  Kernel k = kernel("bf16_sum", [](Builder& b) {
    auto [N] = b.dims("N");
    auto X = b.input("X", {1, N}, bf16);
    auto Y = b.output("Y", {1}, bf16);
    b.grid({b.constant(1)}, [&](Index i) {
      b.store(Y.tile({i}, {1}), row_sum(b.load(X.tile({i, i}, {1, 512}))));
    });
  });
  HostTensor x(DType::bf16, {1, 300}), y(DType::bf16, {1});
  for (int64_t e = 0; e < 300; ++e) x.set(e, 1.0f);
  y.poison();
  rt.compile(k).launch({x.view(), y.view()});
  INFO("on " << rt.describe());
  CHECK(y.get(0) == 300.0f);
}

/// f32 values where a conversion to bf16 or f16 is easy to get wrong.
inline std::vector<float> hardF32Values() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(),
                          65504.0f, 65519.0f, 65520.0f, 1e6f, 5.96e-8f, 2.98e-8f, 2.99e-8f, 6.1e-5f,
                          3.0e-5f, 1e-45f, 3.3895e38f, 3.3896e38f};
  // Exact ties of each format (even and odd neighbours) and their one-ulp neighbours.
  for (float base : {1.0f, 3.0f, 1000.0f, 0.001f, 1e-20f, 1e20f}) {
    for (int k = 0; k < 4; ++k) {
      float bf16Tie = base + float(2 * k + 1) * base * 0x1p-8f, f16Tie = base + float(2 * k + 1) * base * 0x1p-11f;
      for (float t : {bf16Tie, f16Tie})
        v.insert(v.end(), {t, -t, std::nextafter(t, 0.0f), std::nextafter(t, 2 * t)});
    }
  }
  return v;
}

inline bool sameValue(uint16_t got, uint16_t want, DType dt) {
  auto isNaN = [&](uint16_t h) {
    return dt == DType::f16 ? ((h & 0x7C00u) == 0x7C00u && (h & 0x3FFu)) : ((h & 0x7F80u) == 0x7F80u && (h & 0x7Fu));
  };
  return isNaN(want) ? isNaN(got) : got == want; // any NaN is NaN; everything else bit for bit
}

/// f32 -> bf16/f16 and back, in a JIT'd kernel, bit for bit against kiln's host conversions
/// (round to nearest even, NaN stays NaN): what the GPU's cvt.rn does too.
inline void checkConversions(const Runtime& rt, DType narrow) {
  using namespace kiln::dsl;
  Kernel down = kernel("to_narrow", [&](Builder& b) {
    auto [N] = b.dims("N");
    auto X = b.input("X", {N}, f32);
    auto Y = b.output("Y", {N}, narrow);
    b.grid({cdiv(N, 64)}, [&](Index i) { b.store(Y.tile({i}, {64}), cast(b.load(X.tile({i}, {64})), narrow)); });
  });
  Kernel up = kernel("to_wide", [&](Builder& b) {
    auto [N] = b.dims("N");
    auto X = b.input("X", {N}, narrow);
    auto Y = b.output("Y", {N}, f32);
    b.grid({cdiv(N, 64)}, [&](Index i) { b.store(Y.tile({i}, {64}), cast(b.load(X.tile({i}, {64})), f32)); });
  });
  INFO(to_string(narrow) << " on " << rt.describe());

  std::vector<float> values = hardF32Values();
  const auto n = int64_t(values.size());
  HostTensor x(DType::f32, {n}), y(narrow, {n});
  for (int64_t i = 0; i < n; ++i) x.set(i, values[size_t(i)]);
  y.poison();
  rt.compile(down).launch({x.view(), y.view()});
  const auto* got = static_cast<const uint16_t*>(y.data());
  int wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    float v = values[size_t(i)];
    uint16_t want = narrow == DType::f16 ? f32_to_f16(v) : f32_to_bf16(v);
    if (!sameValue(got[i], want, narrow) && ++wrong <= 5)
      UNSCOPED_INFO("f32 " << v << " -> got 0x" << std::hex << got[i] << ", want 0x" << want << std::dec);
  }
  CHECK(wrong == 0);

  // Every one of the 65536 narrow values widens exactly.
  HostTensor h(narrow, {65536}), w(DType::f32, {65536});
  auto* hb = static_cast<uint16_t*>(h.data());
  for (uint32_t i = 0; i < 65536; ++i) hb[i] = uint16_t(i);
  w.poison();
  rt.compile(up).launch({h.view(), w.view()});
  wrong = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    float want = narrow == DType::f16 ? f16_to_f32(uint16_t(i)) : bf16_to_f32(uint16_t(i));
    float g = w.get(i);
    bool ok = std::isnan(want) ? std::isnan(g) : std::memcmp(&g, &want, 4) == 0;
    if (!ok && ++wrong <= 5) UNSCOPED_INFO("0x" << std::hex << i << std::dec << " -> got " << g << ", want " << want);
  }
  CHECK(wrong == 0);
}

/// Everything above, on one runtime.
inline void runDtypeSuite(const Runtime& rt) {
  for (const catalogue::Entry& e : catalogue::all())
    for (DType d : {DType::f32, DType::bf16, DType::f16}) checkEntryOnShapes(rt, e, d);
  checkBf16SumAccumulatesInF32(rt);
  checkConversions(rt, DType::bf16);
  checkConversions(rt, DType::f16);
}

} // namespace kiln::test
