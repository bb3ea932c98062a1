#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "kiln/error.hpp"
#include "kiln/reference.hpp"
#include "kiln/runtime.hpp"

using namespace kiln;
using Catch::Contains;

namespace {

HostTensor make(DType dt, std::vector<int64_t> dims, std::vector<float> values) {
  HostTensor t(dt, std::move(dims));
  REQUIRE(int64_t(values.size()) == t.numel());
  for (size_t i = 0; i < values.size(); ++i) t.set(int64_t(i), values[i]);
  return t;
}

void require_close(const std::vector<double>& got, const std::vector<double>& want,
                   double tol = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("index " << i);
    REQUIRE(got[i] == Approx(want[i]).margin(tol));
  }
}

// Runs `fn`, which must throw an InvalidArgument kiln::Error mentioning `needle`.
template <typename Fn>
void require_invalid(Fn fn, const std::string& needle) {
  try {
    fn();
    FAIL("expected kiln::Error");
  } catch (const Error& e) {
    REQUIRE(e.kind() == ErrorKind::InvalidArgument);
    REQUIRE_THAT(e.what(), Contains(needle));
  }
}

} // namespace

TEST_CASE("gelu matches the tanh approximation at known points", "[reference]") {
  REQUIRE(reference::gelu(0.0) == 0.0);
  REQUIRE(reference::gelu(1.0) == Approx(0.8411919906082768).epsilon(1e-14));
  REQUIRE(reference::gelu(-1.0) == Approx(-0.15880800939172324).epsilon(1e-14));
  REQUIRE(reference::gelu(3.0) == Approx(2.996362607918227).epsilon(1e-14));
}

TEST_CASE("reference gemm multiplies a hand-computed 2x3 by 3x2", "[reference]") {
  HostTensor a = make(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor b = make(DType::f32, {3, 2}, {7, 8, 9, 10, 11, 12});
  require_close(reference::gemm(a.view(), b.view(), nullptr, reference::Epilogue::none),
                {58, 64, 139, 154});
}

TEST_CASE("reference gemm applies bias then relu", "[reference]") {
  HostTensor a = make(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor b = make(DType::f32, {3, 2}, {7, 8, 9, 10, 11, 12});
  HostTensor bias = make(DType::f32, {2}, {-60, -150});
  TensorView bv = bias.view();
  require_close(reference::gemm(a.view(), b.view(), &bv, reference::Epilogue::bias_relu),
                {0, 0, 79, 4});
}

TEST_CASE("reference gemm adds bias and a residual, before the epilogue", "[reference]") {
  HostTensor a = make(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor b = make(DType::f32, {3, 2}, {7, 8, 9, 10, 11, 12});
  HostTensor bias = make(DType::f32, {2}, {-60, -150});
  HostTensor res = make(DType::f32, {2, 2}, {1, 2, -200, 3});
  TensorView bv = bias.view(), rv = res.view();
  require_close(reference::gemm(a.view(), b.view(), &bv, reference::Epilogue::bias, &rv), {-1, -84, -121, 7});
  require_close(reference::gemm(a.view(), b.view(), &bv, reference::Epilogue::bias_relu, &rv), {0, 0, 0, 7});
  HostTensor wrong = make(DType::f32, {2, 3}, {0, 0, 0, 0, 0, 0});
  TensorView wv = wrong.view();
  require_invalid([&] { reference::gemm(a.view(), b.view(), &bv, reference::Epilogue::bias, &wv); },
                  "residual must be [2x2]");
}

TEST_CASE("reference gemm applies bias then gelu", "[reference]") {
  HostTensor a = make(DType::f32, {2, 3}, {1, 0, 0, 0, 1, 0});
  HostTensor b = make(DType::f32, {3, 2}, {1, -1, 2, 0, 5, 5});
  HostTensor bias = make(DType::f32, {2}, {0.5f, -0.5f});
  TensorView bv = bias.view();
  // A@B + bias = [[1.5, -1.5], [2.5, -0.5]]
  require_close(reference::gemm(a.view(), b.view(), &bv, reference::Epilogue::bias_gelu),
                {1.3995715769802328, -0.10042842301976707, 2.484915733910001,
                 -0.15428599017485606});
}

TEST_CASE("reference gemm reads narrow dtypes and strided operands", "[reference]") {
  HostTensor a = make(DType::bf16, {2, 3}, {1, 2, 3, 4, 5, 6});
  // B^T stored row-major as 2x3; viewing it with swapped strides gives B (3x2).
  HostTensor bt = make(DType::f16, {2, 3}, {7, 9, 11, 8, 10, 12});
  TensorView b{bt.data(), DType::f16, {3, 2}, {1, 3}};
  require_close(reference::gemm(a.view(), b, nullptr, reference::Epilogue::none),
                {58, 64, 139, 154});

  // bf16 inputs are used as rounded: 1.00390625 is a tie that rounds to 1.
  HostTensor x = make(DType::bf16, {1, 1}, {1.00390625f});
  HostTensor y = make(DType::f32, {1, 1}, {1});
  REQUIRE(reference::gemm(x.view(), y.view(), nullptr, reference::Epilogue::none)[0] == 1.0);
}

TEST_CASE("reference softmax matches a hand case and rows sum to one", "[reference]") {
  HostTensor x = make(DType::f32, {2, 3}, {1, 2, 3, 1000, 1000, 1000});
  require_close(reference::softmax(x.view()),
                {0.09003057317038046, 0.24472847105479767, 0.6652409557748219,
                 1.0 / 3, 1.0 / 3, 1.0 / 3});

  HostTensor r(DType::f32, {7, 129});
  r.fill_random(5, -20.0f, 20.0f);
  const std::vector<double> s = reference::softmax(r.view());
  for (int m = 0; m < 7; ++m) {
    double sum = 0;
    for (int n = 0; n < 129; ++n) {
      REQUIRE(s[size_t(m * 129 + n)] >= 0.0);
      sum += s[size_t(m * 129 + n)];
    }
    REQUIRE(sum == Approx(1.0).epsilon(1e-12));
  }
}

TEST_CASE("reference rmsnorm matches a hand case", "[reference]") {
  HostTensor x = make(DType::f32, {2, 2}, {3, 4, 1, 1});
  HostTensor w = make(DType::f32, {2}, {1, 2});
  // Row 0: rms = sqrt(12.5); row 1 with eps = 3: sqrt(1 + 3) = 2.
  require_close(reference::rmsnorm(x.view(), w.view(), 0.0),
                {3 / std::sqrt(12.5), 8 / std::sqrt(12.5), 1, 2});
  require_close(reference::rmsnorm(x.view(), w.view(), 3.0),
                {3 / std::sqrt(15.5), 8 / std::sqrt(15.5), 0.5, 1});
}

TEST_CASE("reference add sums elementwise through any strides", "[reference]") {
  HostTensor x = make(DType::f32, {2, 2}, {1, 2, 3, 4});
  HostTensor y = make(DType::f16, {2, 2}, {10, 20, 30, 40});
  require_close(reference::add(x.view(), y.view()), {11, 22, 33, 44});

  TensorView yt{y.data(), DType::f16, {2, 2}, {1, 2}}; // transpose of y
  require_close(reference::add(x.view(), yt), {11, 32, 23, 44});

  HostTensor p = make(DType::f32, {2, 1, 2}, {1, 2, 3, 4});
  require_close(reference::add(p.view(), p.view()), {2, 4, 6, 8});
}

TEST_CASE("reference shape errors throw InvalidArgument naming the argument", "[reference]") {
  HostTensor a23(DType::f32, {2, 3}), b32(DType::f32, {3, 2}), b22(DType::f32, {2, 2});
  HostTensor v3(DType::f32, {3}), v2(DType::f32, {2}), t3(DType::f32, {2, 2, 2});
  TensorView bias3 = v3.view(), matrix_bias = b22.view();
  using reference::Epilogue;

  require_invalid([&] { reference::gemm(v3.view(), b32.view(), nullptr, Epilogue::none); },
                  "reference::gemm: A must be rank 2");
  require_invalid([&] { reference::gemm(a23.view(), v3.view(), nullptr, Epilogue::none); },
                  "B must be rank 2");
  require_invalid([&] { reference::gemm(a23.view(), b22.view(), nullptr, Epilogue::none); },
                  "A.dims[1] must equal B.dims[0]");
  require_invalid([&] { reference::gemm(a23.view(), b32.view(), &bias3, Epilogue::bias_relu); },
                  "bias must have length 2");
  require_invalid(
      [&] { reference::gemm(a23.view(), b32.view(), &matrix_bias, Epilogue::bias_gelu); },
      "bias must be rank 1");
  require_invalid([&] { reference::gemm(a23.view(), b32.view(), nullptr, Epilogue::bias_relu); },
                  "bias is required");
  require_invalid([&] { reference::softmax(t3.view()); }, "reference::softmax: X must be rank 2");
  require_invalid([&] { reference::add(a23.view(), b32.view()); },
                  "reference::add: X and Y must have the same dims");
  require_invalid([&] { reference::rmsnorm(a23.view(), v2.view(), 1e-6); },
                  "reference::rmsnorm: W must have length 3");
  require_invalid([&] { reference::rmsnorm(a23.view(), v3.view(), -1.0); }, "eps");

  TensorView bad_strides{a23.data(), DType::f32, {2, 3}, {1}};
  require_invalid([&] { reference::softmax(bad_strides); }, "X has 1 strides for rank 2");
}

TEST_CASE("gpu_gemm on a CPU runtime throws Unsupported", "[reference][cublas]") {
  using reference::Epilogue;
  Runtime cpu = Runtime::create(Backend::cpu);
  HostTensor a(DType::f32, {2, 3}), b(DType::f32, {3, 2}), c(DType::f32, {2, 2});
  try {
    reference::gpu_gemm(cpu, a.view(), b.view(), nullptr, Epilogue::none, c.view());
    FAIL("expected kiln::Error");
  } catch (const Error& e) {
    REQUIRE(e.kind() == ErrorKind::Unsupported);
    REQUIRE_THAT(e.what(), Contains("runs cuBLASLt on a CUDA runtime"));
  }
}

TEST_CASE("gpu_gemm argument errors throw InvalidArgument naming the argument", "[reference][cublas]") {
  // Arguments are checked before the backend is asked, so a CPU runtime shows them.
  using reference::Epilogue;
  Runtime cpu = Runtime::create(Backend::cpu);
  HostTensor a(DType::f32, {2, 3}), b(DType::f32, {3, 2}), c(DType::f32, {2, 2}), b42(DType::f32, {4, 2}),
      c23(DType::f32, {2, 3}), bias3(DType::f32, {3}), a16(DType::bf16, {2, 3});
  auto run = [&](const TensorView& av, const TensorView& bv, const TensorView* bias, Epilogue e,
                 const TensorView& cv) { reference::gpu_gemm(cpu, av, bv, bias, e, cv); };
  require_invalid([&] { run(a.view(), b42.view(), nullptr, Epilogue::none, c.view()); },
                  "reference::gpu_gemm: A.dims[1] must equal B.dims[0]");
  require_invalid([&] { run(a.view(), b.view(), nullptr, Epilogue::none, c23.view()); },
                  "C must be [2x2] (M x N)");
  require_invalid([&] { run(a16.view(), b.view(), nullptr, Epilogue::none, c.view()); },
                  "B must have A's dtype bf16");
  require_invalid([&] { run(a.view(), b.view(), nullptr, Epilogue::bias_relu, c.view()); }, "bias is required");
  TensorView b3 = bias3.view();
  require_invalid([&] { run(a.view(), b.view(), &b3, Epilogue::bias_gelu, c.view()); }, "bias must have length 2");
  TensorView strided_bias{bias3.data(), DType::f32, {2}, {2}};
  require_invalid([&] { run(a.view(), b.view(), &strided_bias, Epilogue::bias_relu, c.view()); },
                  "bias must be contiguous");
  TensorView bt{b.data(), DType::f32, {3, 2}, {1, 3}};
  require_invalid([&] { run(a.view(), bt, nullptr, Epilogue::none, c.view()); }, "B must have inner stride 1");
  TensorView overlapping{c.data(), DType::f32, {2, 2}, {1, 1}};
  require_invalid([&] { run(a.view(), b.view(), nullptr, Epilogue::none, overlapping); },
                  "C must have a row stride >= its row length 2");
  TensorView short_rows{a.data(), DType::f32, {2, 3}, {2, 1}};
  require_invalid([&] { run(short_rows, b.view(), nullptr, Epilogue::none, c.view()); },
                  "A must have a row stride >= its row length 3");
}

TEST_CASE("gpu_attention on a CPU runtime throws Unsupported", "[reference][cudnn]") {
  Runtime cpu = Runtime::create(Backend::cpu);
  HostTensor q(DType::bf16, {1, 2, 4, 16}), kv(DType::bf16, {1, 2, 4, 16}), o(DType::bf16, {1, 2, 4, 16});
  try {
    reference::gpu_attention(cpu, q.view(), kv.view(), kv.view(), true, o.view());
    FAIL("expected kiln::Error");
  } catch (const Error& e) {
    REQUIRE(e.kind() == ErrorKind::Unsupported);
    REQUIRE_THAT(e.what(), Contains("runs cuDNN on a CUDA runtime"));
  }
}

TEST_CASE("gpu_attention argument errors throw InvalidArgument naming the argument", "[reference][cudnn]") {
  // Checked before the backend is asked, as gpu_gemm's.
  Runtime cpu = Runtime::create(Backend::cpu);
  const int64_t B = 1, H = 4, T = 3, S = 5, D = 16;
  HostTensor q(DType::bf16, {B, H, T, D}), k(DType::bf16, {B, 2, S, D}), v(DType::bf16, {B, 2, S, D}),
      o(DType::bf16, {B, H, T, D}), lse(DType::f32, {B, H, T});
  auto run = [&](const TensorView& qv, const TensorView& kv, const TensorView& vv, const TensorView& ov,
                 const TensorView* l = nullptr) { reference::gpu_attention(cpu, qv, kv, vv, false, ov, l); };
  HostTensor q32(DType::f32, {B, H, T, D}), o16(DType::f16, {B, H, T, D}), k3(DType::bf16, {B, 3, S, D}),
      kd(DType::bf16, {B, 2, S, 8}), vs(DType::bf16, {B, 2, S + 1, D}), oT(DType::bf16, {B, H, T + 1, D}),
      qLong(DType::bf16, {B, H, S + 1, D}), oLong(DType::bf16, {B, H, S + 1, D}), q3(DType::bf16, {H, T, D}),
      lse16(DType::bf16, {B, H, T}), lseShort(DType::f32, {B, H, T - 1});
  require_invalid([&] { run(q32.view(), k.view(), v.view(), o.view()); }, "Q must be bf16 or f16");
  require_invalid([&] { run(q.view(), k.view(), v.view(), o16.view()); }, "O must have Q's dtype bf16");
  require_invalid([&] { run(q3.view(), k.view(), v.view(), o.view()); }, "Q must be rank 4");
  require_invalid([&] { run(q.view(), kd.view(), v.view(), o.view()); }, "K must be [B, G, S, D] with Q's B = 1 and D = 16");
  require_invalid([&] { run(q.view(), k.view(), vs.view(), o.view()); }, "V must have K's dims");
  require_invalid([&] { run(q.view(), k.view(), v.view(), oT.view()); }, "O must have Q's dims");
  require_invalid([&] { run(q.view(), k3.view(), k3.view(), o.view()); },
                  "the query heads H = 4 must be a multiple of K's heads G = 3");
  require_invalid([&] { run(qLong.view(), k.view(), v.view(), oLong.view()); }, "Q's T = 6 queries past K's S = 5");
  TensorView columns{k.data(), DType::bf16, {B, 2, S, D}, {2 * S * D, S * D, 1, S}};
  require_invalid([&] { run(q.view(), columns, v.view(), o.view()); }, "K must have inner stride 1");
  TensorView l16 = lse16.view(), lShort = lseShort.view();
  require_invalid([&] { run(q.view(), k.view(), v.view(), o.view(), &l16); }, "LSE must be f32");
  require_invalid([&] { run(q.view(), k.view(), v.view(), o.view(), &lShort); }, "LSE must be [B, H, T] = [1, 4, 3]");
  TensorView lStrided{lse.data(), DType::f32, {B, H, T}, {H * T, 1, H}};
  require_invalid([&] { run(q.view(), k.view(), v.view(), o.view(), &lStrided); }, "LSE must be contiguous");
  TensorView nullQ{nullptr, DType::bf16, {B, H, T, D}, {}};
  require_invalid([&] { run(nullQ, k.view(), v.view(), o.view()); }, "Q has a null data pointer");
}

TEST_CASE("gpu_attention_padded asks for a length a sequence and as many queries as keys, naming what is wrong",
          "[reference][cudnn]") {
  Runtime cpu = Runtime::create(Backend::cpu);
  const int64_t B = 2, H = 4, S = 5, D = 16;
  HostTensor q(DType::bf16, {B, H, S, D}), kv(DType::bf16, {B, 2, S, D}), o(DType::bf16, {B, H, S, D}),
      lens(DType::i32, {B}), lensF(DType::f32, {B}), lensShort(DType::i32, {B - 1}), qShort(DType::bf16, {B, H, S - 1, D}),
      oShort(DType::bf16, {B, H, S - 1, D}), wide(DType::i32, {2 * B});
  auto run = [&](const TensorView& qv, const TensorView& lv, const TensorView& ov) {
    reference::gpu_attention_padded(cpu, qv, kv.view(), kv.view(), lv, true, ov);
  };
  require_invalid([&] { run(q.view(), lensF.view(), o.view()); }, "the lengths must be i32 [B] = [2], contiguous");
  require_invalid([&] { run(q.view(), lensShort.view(), o.view()); }, "the lengths must be i32 [B] = [2]");
  TensorView everyOther{wide.data(), DType::i32, {B}, {2}};
  require_invalid([&] { run(q.view(), everyOther, o.view()); }, "contiguous");
  require_invalid([&] { run(qShort.view(), lens.view(), oShort.view()); },
                  "Q's rows T = 4 must equal K's positions S = 5");
  // gpu_attention's own rules first, named for the function called.
  require_invalid([&] { run(q.view(), lens.view(), oShort.view()); },
                  "reference::gpu_attention_padded: O must have Q's dims");
  // Good arguments reach the backend, which has no cuDNN on the CPU.
  try {
    run(q.view(), lens.view(), o.view());
    FAIL("expected kiln::Error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Unsupported);
    CHECK_THAT(e.what(), Contains("runs cuDNN on a CUDA runtime"));
  }
}

TEST_CASE("gpu_attention_packed asks for rank-3 tensors over the same tokens, i32 offsets and a length bound, "
          "naming what is wrong",
          "[reference][cudnn]") {
  Runtime cpu = Runtime::create(Backend::cpu);
  const int64_t H = 4, G = 2, T = 9, D = 16;
  HostTensor q(DType::bf16, {H, T, D}), kv(DType::bf16, {G, T, D}), o(DType::bf16, {H, T, D}),
      off(DType::i32, {3}), offF(DType::f32, {3}), offOne(DType::i32, {1}), q4(DType::bf16, {1, H, T, D}),
      kvShort(DType::bf16, {G, T - 1, D}), kv3(DType::bf16, {3, T, D}), wide(DType::i32, {6});
  auto run = [&](const TensorView& qv, const TensorView& kview, const TensorView& ov, const TensorView& offv,
                 int64_t maxLen) {
    reference::gpu_attention_packed(cpu, qv, kview, kview, offv, maxLen, false, ov);
  };
  require_invalid([&] { run(q4.view(), kv.view(), o.view(), off.view(), 4); },
                  "reference::gpu_attention_packed: Q must be rank 3 ([heads, T, D])");
  require_invalid([&] { run(q.view(), kvShort.view(), o.view(), off.view(), 4); },
                  "K must be [G, T, D] with Q's T = 9 and D = 16");
  require_invalid([&] { run(q.view(), kv3.view(), o.view(), off.view(), 4); },
                  "the query heads H = 4 must be a multiple of K's heads G = 3");
  require_invalid([&] { run(q.view(), kv.view(), o.view(), offF.view(), 4); },
                  "the offsets must be i32 [B + 1] with B >= 1 sequences");
  require_invalid([&] { run(q.view(), kv.view(), o.view(), offOne.view(), 4); }, "with B >= 1 sequences");
  TensorView everyOther{wide.data(), DType::i32, {3}, {2}};
  require_invalid([&] { run(q.view(), kv.view(), o.view(), everyOther, 4); }, "contiguous");
  require_invalid([&] { run(q.view(), kv.view(), o.view(), off.view(), 0); }, "max_len = 0 must be 1 .. T = 9");
  require_invalid([&] { run(q.view(), kv.view(), o.view(), off.view(), 10); }, "max_len = 10 must be 1 .. T = 9");
  TensorView columns{q.data(), DType::bf16, {H, T, D}, {T * D, 1, T}};
  require_invalid([&] { run(columns, kv.view(), o.view(), off.view(), 4); }, "Q must have inner stride 1");
  // Good arguments reach the backend, which has no cuDNN on the CPU.
  try {
    run(q.view(), kv.view(), o.view(), off.view(), 4);
    FAIL("expected kiln::Error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Unsupported);
    CHECK_THAT(e.what(), Contains("runs cuDNN on a CUDA runtime"));
  }
}

TEST_CASE("gpu_attention_packed refuses tensors whose rows cuDNN's 32-bit offsets cannot reach", "[reference][cudnn]") {
  Runtime cpu = Runtime::create(Backend::cpu);
  // Views only (nothing is read): T tokens 2^20 elements apart pass 2^31.
  HostTensor small(DType::bf16, {1, 1, 16});
  const int64_t T = 4096, stride = int64_t(1) << 20;
  const TensorView huge{small.data(), DType::bf16, {1, T, 16}, {16, stride, 1}};
  HostTensor off(DType::i32, {2});
  try {
    reference::gpu_attention_packed(cpu, huge, huge, huge, off.view(), 16, false, huge);
    FAIL("expected kiln::Error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Unsupported);
    CHECK_THAT(e.what(), Contains("Q's tokens lie past what cuDNN's 32-bit ragged offsets reach"));
  }
}

TEST_CASE("the swiglu reference gates X Wg's silu by X Wu, and names a weight of the wrong shape", "[reference]") {
  // X = [1, 2], Wg = [[1], [0]] -> g = 1; Wu = [[0], [3]] -> u = 6; h = silu(1) * 6.
  HostTensor x(DType::f32, {1, 2}), wg(DType::f32, {2, 1}), wu(DType::f32, {2, 1}), wShort(DType::f32, {1, 1}),
      wWide(DType::f32, {2, 2});
  x.set(0, 1.0f), x.set(1, 2.0f);
  wg.set(0, 1.0f), wg.set(1, 0.0f);
  wu.set(0, 0.0f), wu.set(1, 3.0f);
  const std::vector<double> h = reference::swiglu(x.view(), wg.view(), wu.view());
  REQUIRE(h.size() == 1);
  CHECK(h[0] == Approx(6.0 / (1.0 + std::exp(-1.0))).epsilon(1e-12));
  require_invalid([&] { reference::swiglu(x.view(), wShort.view(), wShort.view()); },
                  "Wg.dims[0] must equal X.dims[1] (K)");
  require_invalid([&] { reference::swiglu(x.view(), wg.view(), wWide.view()); }, "Wu must have Wg's dims [K, N]");
}

TEST_CASE("the rope reference rotates each head's halves by its token's row of the tables, and names a wrong "
          "position",
          "[reference]") {
  // One token at position 1 of 2, one head of D = 2: (x1, x2) = (1, 2), angle a: (cos a - 2 sin a, 2 cos a + sin a).
  HostTensor x(DType::f32, {1, 1, 2}), c(DType::f32, {2, 1}), s(DType::f32, {2, 1}), pos(DType::i32, {1}),
      posF(DType::f32, {1});
  x.set(0, 1.0f), x.set(1, 2.0f);
  c.set(0, 1.0f), s.set(0, 0.0f);
  c.set(1, 0.6f), s.set(1, 0.8f);
  pos.set(0, 1.0f);
  const std::vector<double> y = reference::rope(x.view(), c.view(), s.view(), pos.view());
  REQUIRE(y.size() == 2);
  CHECK(y[0] == Approx(0.6 - 1.6).epsilon(1e-6));
  CHECK(y[1] == Approx(1.2 + 0.8).epsilon(1e-6));
  pos.set(0, 2.0f);
  require_invalid([&] { reference::rope(x.view(), c.view(), s.view(), pos.view()); },
                  "Positions[0] = 2 is outside the tables' 2 rows");
  require_invalid([&] { reference::rope(x.view(), c.view(), s.view(), posF.view()); }, "Positions must be i32 [T] = [1]");
}
