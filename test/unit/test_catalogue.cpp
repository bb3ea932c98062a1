// The catalogue: names, shapes and the run-and-verify path the CLI and demo use.
#include <algorithm>
#include <cmath>
#include <catch2/catch.hpp>

#include "kiln/catalogue.hpp"
#include "kiln/error.hpp"
#include "kiln/reference.hpp"

using namespace kiln;
using Catch::Matchers::Contains;

TEST_CASE("the catalogue has the foundation kernels and the MLP's residual GEMM", "[catalogue]") {
  std::vector<std::string> names;
  for (const auto& e : catalogue::all()) names.push_back(e.name);
  CHECK(names == std::vector<std::string>{"gemm", "gemm_bias_relu", "gemm_bias_gelu", "gemm_bias_residual",
                                          "softmax", "add", "rmsnorm", "swiglu", "rope", "attention", "attention_causal",
                                          "attention_lse", "attention_causal_lse", "attention_decode",
                                          "attention_decode_lse", "attention_padded", "attention_padded_causal",
                                          "attention_packed", "attention_packed_causal"});
}

TEST_CASE("attention's shapes name batch, query heads, K/V heads, sequence and head dim", "[catalogue]") {
  const auto& a = catalogue::find("attention");
  CHECK(catalogue::parse_shape("4x32x8x4096x128", a) == std::vector<int64_t>{4, 32, 8, 4096, 128});
  CHECK_THROWS_AS(catalogue::parse_shape("4x32x4096x128", a), Error);
  try {
    a.problem({1, 6, 4, 16, 64}, DType::bf16, 1);
    FAIL("6 query heads over 4 K/V heads made a problem");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidArgument);
    CHECK_THAT(std::string(e.what()), Contains("multiple of the K/V heads G (4)"));
  }
  CHECK_THROWS_AS(a.problem({1, 1, 1, 16, 96}, DType::bf16, 1), Error);
  CHECK(a.specialisation({1, 1, 1, 16, 64}) == "D=64");
  CHECK(catalogue::kernel_for(a, DType::bf16, {1, 1, 1, 16, 64}).signature().args.at(0).dims.back().extent == 64);
}

TEST_CASE("attention_decode's shapes add the new queries T before the cache's length S, and T may not pass S",
          "[catalogue]") {
  const auto& a = catalogue::find("attention_decode");
  CHECK(catalogue::parse_shape("1x32x8x1x32768x128", a) == std::vector<int64_t>{1, 32, 8, 1, 32768, 128});
  CHECK_THROWS_AS(catalogue::parse_shape("1x32x8x32768x128", a), Error);
  try {
    a.problem({1, 2, 2, 9, 8, 64}, DType::bf16, 1);
    FAIL("9 queries against 8 positions made a problem");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidArgument);
    CHECK_THAT(std::string(e.what()), Contains("T = 9 queries past the cache's S = 8 positions"));
  }
  CHECK(a.specialisation({1, 1, 1, 1, 16, 64}) == "D=64");
  catalogue::Problem p = a.problem({2, 4, 2, 3, 50, 32}, DType::f32, 1);
  CHECK(p.args.at(0).view().dims == std::vector<int64_t>{2, 4, 3, 32});
  CHECK(p.args.at(1).view().dims == std::vector<int64_t>{2, 2, 50, 32});
  // Query r of 3 sees 48 + r keys: 48 + 49 + 50 pairs per head.
  CHECK(p.flops == 4.0 * 2 * 4 * (48 + 49 + 50) * 32);
  // T = S is the causal kernel's problem, flop for flop.
  CHECK(a.problem({1, 2, 1, 40, 40, 32}, DType::f32, 1).flops ==
        catalogue::find("attention_causal").problem({1, 2, 1, 40, 32}, DType::f32, 1).flops);
}

TEST_CASE("the attention reference with fewer queries than keys gives the last rows of the whole sequence's", "[catalogue]") {
  const auto& whole = catalogue::find("attention_causal");
  catalogue::Problem full = whole.problem({1, 2, 1, 30, 32}, DType::f32, 5);
  // Q's last 4 rows per head, as their own [1, 2, 4, 32] tensor.
  HostTensor q(DType::f32, {1, 2, 4, 32});
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t d = 0; d < 32; ++d) q.set((h * 4 + r) * 32 + d, full.args[0].get((h * 30 + 26 + r) * 32 + d));
  std::vector<double> tail = reference::attention(q.view(), full.args[1].view(), full.args[2].view(), true);
  REQUIRE(tail.size() == 2 * 4 * 32);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t d = 0; d < 32; ++d)
        CHECK(tail[size_t((h * 4 + r) * 32 + d)] == full.reference[size_t((h * 30 + 26 + r) * 32 + d)]);
  CHECK_THROWS_AS(reference::attention(full.args[0].view(), q.view(), q.view(), true), Error);
}

TEST_CASE("a large attention problem is verified on a sample of rows spread over every head", "[catalogue]") {
  const auto& a = catalogue::find("attention_causal");
  catalogue::Problem small = a.problem({1, 2, 1, 40, 32}, DType::f32, 1);
  CHECK(small.checked.empty());
  CHECK(small.reference.size() == 2 * 40 * 32);
  CHECK(small.flops == 4.0 * 2 * 40 * 40 * 32 * 0.5);
  catalogue::Problem big = a.problem({2, 4, 2, 2048, 64}, DType::bf16, 1);
  REQUIRE_FALSE(big.checked.empty());
  CHECK(big.checked.size() == big.reference.size());
  CHECK(big.checked.size() == 257 * 64);
  const int64_t last = 2 * 4 * 2048 - 1;
  CHECK(big.checked[255 * 64 + 63] == last * 64 + 63); // the last row of the last head
  CHECK(big.checked.back() == 2047 * 64 + 63);          // the first head's last row
  // The sample's reference is the whole reference's, row for row.
  auto some = reference::attention(big.args[0].view(), big.args[1].view(), big.args[2].view(), true, {0, last});
  REQUIRE(some.size() == 2 * 64);
  for (int d = 0; d < 64; ++d) {
    CHECK(some[size_t(d)] == big.reference[size_t(d)]);
    CHECK(some[size_t(64 + d)] == big.reference[size_t(255 * 64 + d)]);
  }
}

TEST_CASE("verify_output on a sampled problem compares only the sampled elements", "[catalogue]") {
  auto rt = Runtime::create(Backend::cpu);
  catalogue::Problem p = catalogue::find("attention").problem({1, 1, 1, 6000, 32}, DType::f32, 4);
  REQUIRE_FALSE(p.checked.empty());
  catalogue::DeviceProblem d = catalogue::upload(rt, p);
  CHECK_FALSE(catalogue::verify_output(rt, d, p).ok); // still poisoned
  rt.compile(catalogue::kernel_for(catalogue::find("attention"), DType::f32, {1, 1, 1, 6000, 32})).launch(d.views);
  auto r = catalogue::verify_output(rt, d, p);
  INFO(r.summary());
  CHECK(r.ok);
  CHECK(r.numel == int64_t(p.checked.size()));
  // An element outside the sample is not looked at; one inside it is.
  p.checked[0] = -1;
  CHECK_THROWS_AS(catalogue::verify_output(rt, d, p), Error);
}

TEST_CASE("attention_padded's problem pads B sequences to S, the first S long, large values in K and V past each "
          "length, and "
          "checks only each sequence's rows", "[catalogue]") {
  const auto& a = catalogue::find("attention_padded_causal");
  CHECK(a.shape_help == "BxHxGxSxD");
  const int64_t B = 5, H = 4, G = 2, S = 50, D = 32;
  catalogue::Problem p = a.problem({B, H, G, S, D}, DType::f32, 3);
  REQUIRE(p.args.size() == 5);
  const HostTensor& lens = p.args[3];
  REQUIRE(lens.dtype() == DType::i32);
  REQUIRE(lens.dims() == std::vector<int64_t>{B});
  CHECK(lens.get(0) == float(S));
  int64_t rows = 0;
  for (int64_t n = 0; n < B; ++n) {
    const int64_t len = int64_t(lens.get(n));
    CHECK(len >= 1);
    CHECK(len <= S);
    rows += H * len;
    // K and V: large (a thousand times random values) exactly past the length.
    for (int64_t t = 0; t < S; ++t) {
      float kMax = 0, vMax = 0;
      for (int64_t d = 0; d < D; ++d) {
        kMax = std::max(kMax, std::abs(p.args[1].get(((n * G + 1) * S + t) * D + d)));
        vMax = std::max(vMax, std::abs(p.args[2].get(((n * G + 1) * S + t) * D + d)));
      }
      CHECK((kMax > 10) == (t >= len));
      CHECK((vMax > 10) == (t >= len));
      CHECK(std::isfinite(kMax));
    }
  }
  CHECK(p.args[0].dims() == std::vector<int64_t>{B, H, S, D});
  CHECK(p.args[4].dims() == std::vector<int64_t>{B, H, S, D});
  // Only the sequences' rows are checked, each once.
  REQUIRE(p.checked.size() == size_t(rows * D));
  CHECK(p.reference.size() == p.checked.size());
  for (int64_t e : p.checked) {
    const int64_t n = e / (H * S * D), t = e / D % S;
    CHECK(t < int64_t(lens.get(n)));
  }
  // The padding: exactly the rows past the lengths, which routes' outputs are not compared on.
  std::vector<bool> padded(size_t(B * H * S * D), false);
  for (const auto& [first, last] : p.padding)
    for (int64_t e = first; e < last; ++e) {
      CHECK_FALSE(padded[size_t(e)]);
      padded[size_t(e)] = true;
    }
  for (int64_t e = 0; e < B * H * S * D; ++e)
    if (padded[size_t(e)] != (e / D % S >= int64_t(lens.get(e / (H * S * D))))) FAIL("element " << e);
  CHECK(catalogue::find("attention").problem({2, 2, 2, 8, 32}, DType::f32, 1).padding.empty());
  // Sequence 1, head 3, its first row: causal, it sees its own first key only, so its output
  // is that key's value row (V head 3 / 2 = 1).
  for (int64_t d = 0; d < D; ++d) {
    const int64_t element = ((1 * H + 3) * S + 0) * D + d;
    const auto at = std::find(p.checked.begin(), p.checked.end(), element);
    REQUIRE(at != p.checked.end());
    CHECK(p.reference[size_t(at - p.checked.begin())] == Approx(p.args[2].get(((1 * G + 1) * S + 0) * D + d)).margin(1e-6));
  }
  // Large: a sample of rows of every sequence and head.
  catalogue::Problem big = catalogue::find("attention_padded").problem({2, 8, 8, 4096, 128}, DType::bf16, 1);
  CHECK(big.checked.size() == size_t(2 * 8 * 4 * 128));
  CHECK_THROWS_WITH(a.problem({2, 3, 2, 10, 32}, DType::f32, 1),
                    Contains("attention_padded_causal: the query heads H (3) must be a multiple of the K/V heads G (2)"));
}

TEST_CASE("attention_packed's problem packs B sequences of at most S tokens, the first S long, and its reference "
          "is each sequence's attention alone", "[catalogue]") {
  const auto& a = catalogue::find("attention_packed_causal");
  CHECK(a.shape_help == "BxHxGxSxD");
  catalogue::Problem p = a.problem({5, 4, 2, 50, 32}, DType::f32, 3);
  REQUIRE(p.args.size() == 5);
  const HostTensor& off = p.args[3];
  REQUIRE(off.dtype() == DType::i32);
  REQUIRE(off.numel() == 6);
  CHECK(off.get(0) == 0.0f);
  CHECK(off.get(1) == 50.0f);
  for (int64_t n = 1; n <= 5; ++n) {
    CHECK(off.get(n) - off.get(n - 1) >= 1.0f);
    CHECK(off.get(n) - off.get(n - 1) <= 50.0f);
  }
  const int64_t T = int64_t(off.get(5));
  CHECK(p.args[0].dims() == std::vector<int64_t>{4, T, 32});
  CHECK(p.args[1].dims() == std::vector<int64_t>{2, T, 32});
  CHECK(p.args[4].dims() == std::vector<int64_t>{4, T, 32});
  REQUIRE(p.checked.empty());
  REQUIRE(p.reference.size() == size_t(4 * T * 32));
  // Sequence 1, head 3, its first row: causal, it sees its own first key only, so its output
  // is that key's value row (V head 3 / 2 = 1 at token off[1]).
  const int64_t first = int64_t(off.get(1));
  for (int64_t d = 0; d < 32; ++d)
    CHECK(p.reference[size_t((3 * T + first) * 32 + d)] == Approx(p.args[2].get((1 * T + first) * 32 + d)).margin(1e-6));
  // Large: a sample of rows of every sequence and head, with their element indices.
  catalogue::Problem big = catalogue::find("attention_packed").problem({2, 8, 8, 4096, 128}, DType::bf16, 1);
  REQUIRE_FALSE(big.checked.empty());
  CHECK(big.checked.size() == big.reference.size());
  CHECK(big.checked.size() == size_t(2 * 8 * 4 * 128));
  // Heads the kernel cannot take, by name.
  try {
    a.problem({2, 3, 2, 10, 32}, DType::f32, 1);
    FAIL("3 query heads over 2 K/V heads were accepted");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Contains("attention_packed_causal: the query heads H (3) must be a multiple of the K/V heads G (2)"));
  }
  CHECK_THROWS_WITH(a.problem({2, 2, 2, 10, 48}, DType::f32, 1), Contains("head dim D = 48"));
}

TEST_CASE("an unknown kernel name lists the catalogue", "[catalogue][errors]") {
  try {
    catalogue::find("gemm_relu");
    FAIL("expected NotFound");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::NotFound);
    CHECK_THAT(std::string(e.what()), Contains("unknown kernel 'gemm_relu'"));
    CHECK_THAT(std::string(e.what()), Contains("rmsnorm"));
  }
}

TEST_CASE("shapes parse as MxNxK and bad ones say what is expected", "[catalogue][errors]") {
  const auto& g = catalogue::find("gemm");
  CHECK(catalogue::parse_shape("257x129x65", g) == std::vector<int64_t>{257, 129, 65});
  for (const char* bad : {"", "257x129", "1x2x3x4", "0x1x1", "ax1x1", "1x-2x3", "1xx2", "99999999999999x1x1"}) {
    INFO(bad);
    CHECK_THROWS_AS(catalogue::parse_shape(bad, g), Error);
  }
  CHECK(catalogue::parse_shape("7x1000", catalogue::find("softmax")) == std::vector<int64_t>{7, 1000});
}

TEST_CASE("run_and_verify traces, compiles, runs and verifies", "[catalogue]") {
  auto rt = Runtime::create(Backend::cpu);
  auto r = catalogue::run_and_verify(rt, catalogue::find("gemm_bias_relu"), {257, 129, 65}, DType::f32, 11);
  CHECK(r.report.ok);
  CHECK(r.shape == "257x129x65");
  CHECK(r.report.numel == 257 * 129);
  CHECK(r.trace_ms > 0);
  CHECK(r.compile.total_ms() > 0);
  CHECK(r.flops == 2.0 * 257 * 129 * 65);
}

TEST_CASE("a problem uploaded to a runtime verifies only once the kernel has written it", "[catalogue]") {
  auto rt = Runtime::create(Backend::cpu);
  catalogue::Problem p = catalogue::find("add").problem({5, 300}, DType::bf16, 3);
  catalogue::DeviceProblem d = catalogue::upload(rt, p);
  REQUIRE(d.views.size() == 3);
  auto before = catalogue::verify_output(rt, d, p); // the output is still poisoned
  CHECK_FALSE(before.ok);
  CHECK(before.nonfinite == 5 * 300);
  rt.compile(catalogue::add(DType::bf16)).launch(d.views);
  auto after = catalogue::verify_output(rt, d, p);
  INFO(after.summary());
  CHECK(after.ok);
}

TEST_CASE("GEMM entries can take their reference from cuBLASLt, which needs a GPU runtime", "[catalogue]") {
  for (const catalogue::Entry& e : catalogue::all()) {
    INFO(e.name);
    CHECK(bool(e.gpu_problem) == bool(e.make_tiled)); // the GEMMs, and only they
  }
  Runtime cpu = Runtime::create(Backend::cpu);
  try {
    catalogue::find("gemm_bias_relu").gpu_problem(cpu, {8, 8, 8}, DType::bf16, 1);
    FAIL("a CPU runtime gave a cuBLASLt reference");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Unsupported);
  }
}

TEST_CASE("rope refuses an odd or too small head dim, and its shape help gives an even one", "[catalogue]") {
  for (int64_t D : {int64_t(0), int64_t(1), int64_t(65)}) {
    INFO("D = " << D);
    try {
      (void)catalogue::rope(DType::bf16, D);
      FAIL("an odd head dim made a kernel");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::InvalidArgument);
      CHECK_THAT(std::string(e.what()), Contains("the head dim D must be even and at least 2, got " + std::to_string(D)));
    }
  }
  try {
    (void)catalogue::parse_shape("7x9", catalogue::find("rope"));
    FAIL("a rank-2 shape parsed for rope");
  } catch (const Error& e) {
    CHECK_THAT(std::string(e.what()), Contains("e.g. 77x32x128"));
  }
}
