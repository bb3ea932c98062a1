#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "kiln/verify.hpp"

using namespace kiln;
using Catch::Contains;

namespace {

HostTensor random_f32(std::vector<int64_t> dims, uint64_t seed) {
  HostTensor t(DType::f32, std::move(dims));
  t.fill_random(seed);
  return t;
}

} // namespace

TEST_CASE("default tolerances follow the output dtype", "[verify]") {
  REQUIRE(verify::Tolerance::for_dtype(DType::f32).rel_l2 == 1e-5);
  REQUIRE(verify::Tolerance::for_dtype(DType::f16).rel_l2 == 1e-2);
  REQUIRE(verify::Tolerance::for_dtype(DType::bf16).rel_l2 == 1e-2);
}

TEST_CASE("the verifier passes a correct output", "[verify]") {
  HostTensor out = random_f32({33, 17}, 7);
  const auto r = verify::compare(out.view(), out.to_f64(), verify::Tolerance{});
  REQUIRE(r.ok);
  REQUIRE(r.rel_l2 == 0.0);
  REQUIRE(r.max_abs == 0.0);
  REQUIRE(r.nonfinite == 0);
  REQUIRE(r.numel == 33 * 17);
  REQUIRE(r.summary() == "reference_ok=true rel_l2=0 max_abs=0 tol=1e-05 numel=561");
}

TEST_CASE("the verifier computes relative L2 and the worst element", "[verify]") {
  HostTensor out(DType::f32, {4});
  for (int i = 0; i < 4; ++i) out.set(i, float(i + 1));
  const std::vector<double> ref{1, 2, 3.5, 4};
  const auto r = verify::compare(out.view(), ref, verify::Tolerance{1.0, 1.0});
  REQUIRE(r.ok);
  REQUIRE(r.rel_l2 == Approx(0.5 / std::sqrt(1 + 4 + 12.25 + 16)));
  REQUIRE(r.max_abs == 0.5);
  REQUIRE(r.worst_index == 2);
}

TEST_CASE("the verifier fails a planted wrong element and names it", "[verify]") {
  HostTensor out = random_f32({16, 16}, 3);
  const std::vector<double> ref = out.to_f64();
  out.set(7, out.get(7) + 0.5f);
  const auto r = verify::compare(out.view(), ref, verify::Tolerance::for_dtype(DType::f32));
  REQUIRE_FALSE(r.ok);
  REQUIRE(r.nonfinite == 0);
  REQUIRE(r.worst_index == 7);
  REQUIRE(r.max_abs == Approx(0.5).margin(1e-6));
  REQUIRE(r.rel_l2 > 1e-3);
  REQUIRE_THAT(r.summary(), Contains("reference_ok=false"));
  REQUIRE_THAT(r.summary(), Contains("> tol 1e-05 (worst at flat index 7"));
}

TEST_CASE("the verifier fails an output element left unwritten", "[verify]") {
  HostTensor expected = random_f32({8, 8}, 11);
  HostTensor out(DType::bf16, {8, 8});
  out.poison();
  for (int64_t i = 0; i < out.numel(); ++i)
    if (i != 42) out.set(i, expected.get(i));
  const auto r = verify::compare(out.view(), expected.to_f64(), verify::Tolerance{1e30});
  REQUIRE_FALSE(r.ok);
  REQUIRE(r.nonfinite == 1);
  REQUIRE(r.first_nonfinite == 42);
  REQUIRE_THAT(r.summary(),
               Contains("1 non-finite elements (first at flat index 42: never written"));
}

TEST_CASE("the verifier fails NaN and Inf however loose the tolerance", "[verify]") {
  const float bad = GENERATE(std::numeric_limits<float>::quiet_NaN(),
                             std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity());
  HostTensor out = random_f32({3, 5}, 5);
  const std::vector<double> ref = out.to_f64();
  out.set(4, bad);
  out.set(9, bad);
  const auto r = verify::compare(out.view(), ref, verify::Tolerance{1e300});
  REQUIRE_FALSE(r.ok);
  REQUIRE(r.nonfinite == 2);
  REQUIRE(r.first_nonfinite == 4);
  REQUIRE(r.max_abs == 0.0); // the finite elements all agree
}

TEST_CASE("the verifier reads the output through its strides", "[verify]") {
  // Buffer holds a 2x3 row-major matrix; the view is its 3x2 transpose.
  HostTensor buf(DType::f32, {2, 3});
  for (int i = 0; i < 6; ++i) buf.set(i, float(i + 1)); // [[1,2,3],[4,5,6]]
  TensorView tr{buf.data(), DType::f32, {3, 2}, {1, 3}};
  const auto good = verify::compare(tr, {1, 4, 2, 5, 3, 6}, verify::Tolerance{});
  REQUIRE(good.ok);
  const auto bad = verify::compare(tr, {1, 2, 3, 4, 5, 6}, verify::Tolerance{});
  REQUIRE_FALSE(bad.ok);
  REQUIRE(bad.worst_index == 1); // out=4 vs ref=2 and out=3 vs ref=5 tie; first wins
}

TEST_CASE("a bf16 output passes its own tolerance but not the f32 one", "[verify]") {
  HostTensor exact = random_f32({64, 32}, 21);
  HostTensor out(DType::bf16, {64, 32});
  std::vector<double> ref(size_t(exact.numel()));
  for (int64_t i = 0; i < exact.numel(); ++i) {
    ref[size_t(i)] = double(exact.get(i)) + 1e-9; // not exactly representable
    out.set(i, exact.get(i));
  }
  REQUIRE(verify::compare(out.view(), ref, verify::Tolerance::for_dtype(DType::bf16)).ok);
  REQUIRE_FALSE(verify::compare(out.view(), ref, verify::Tolerance::for_dtype(DType::f32)).ok);
}

TEST_CASE("a reference of the wrong size fails with a reason", "[verify]") {
  HostTensor out = random_f32({4, 4}, 1);
  const auto r = verify::compare(out.view(), std::vector<double>(15, 0.0), verify::Tolerance{1e9});
  REQUIRE_FALSE(r.ok);
  REQUIRE(r.numel == 16);
  REQUIRE_THAT(r.summary(), Contains("reference size differs from output numel 16"));
}

TEST_CASE("an all-zero reference is judged by absolute L2", "[verify]") {
  HostTensor out(DType::f32, {10});
  const std::vector<double> zeros(10, 0.0);
  REQUIRE(verify::compare(out.view(), zeros, verify::Tolerance{}).ok);
  out.set(3, 1e-3f);
  const auto r = verify::compare(out.view(), zeros, verify::Tolerance{});
  REQUIRE_FALSE(r.ok);
  REQUIRE(r.rel_l2 == Approx(1e-3));
  REQUIRE(r.worst_index == 3);
}

TEST_CASE("a non-finite reference never passes", "[verify]") {
  HostTensor out(DType::f32, {3});
  const std::vector<double> ref{0.0, std::numeric_limits<double>::infinity(), 0.0};
  const auto r = verify::compare(out.view(), ref, verify::Tolerance{1e300});
  REQUIRE_FALSE(r.ok);
  REQUIRE(r.worst_index == 1);
  REQUIRE_THAT(r.summary(), Contains("reference is not finite (first at flat index 1)"));
}

TEST_CASE("one badly wrong element in a large output fails even when the L2 error is small", "[verify]") {
  // 1000x1000 bf16-scale data; one element off by 20% of the peak moves rel_l2 by ~3e-4,
  // far under bf16's 1e-2, but the per-element bound (5% of the peak) catches it.
  HostTensor out(DType::f32, {1000, 1000});
  out.fill_random(11);
  std::vector<double> ref = out.to_f64();
  out.set(123456, out.get(123456) + 0.2f);
  auto r = verify::compare(out.view(), ref, verify::Tolerance::for_dtype(DType::bf16));
  CHECK(r.rel_l2 < 1e-2);
  CHECK_FALSE(r.ok);
  CHECK(r.worst_index == 123456);
  CHECK_THAT(r.summary(), Catch::Matchers::Contains("x peak |ref|"));
}
