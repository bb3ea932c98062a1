#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "kiln/error.hpp"
#include "kiln/tensor.hpp"

using namespace kiln;
using Catch::Matchers::Contains;

TEST_CASE("error kinds have stable names", "[error]") {
  REQUIRE(std::string(to_string(ErrorKind::InvalidArgument)) == "InvalidArgument");
  REQUIRE(std::string(to_string(ErrorKind::Runtime)) == "Runtime");
  const Error e(ErrorKind::NotFound, "no kernel 'x'");
  REQUIRE(e.kind() == ErrorKind::NotFound);
  REQUIRE(std::string(e.what()) == "no kernel 'x'");
}

TEST_CASE("row-major strides count elements from the last dim", "[tensor]") {
  REQUIRE(row_major_strides({2, 3, 4}) == std::vector<int64_t>{12, 4, 1});
  REQUIRE(row_major_strides({7}) == std::vector<int64_t>{1});
  REQUIRE(row_major_strides({}).empty());
}

TEST_CASE("a view describes itself with dtype, dims and effective strides", "[tensor]") {
  TensorView v{nullptr, DType::bf16, {129, 65}, {}};
  REQUIRE(v.numel() == 129 * 65);
  REQUIRE(v.effective_strides() == std::vector<int64_t>{65, 1});
  REQUIRE(v.describe() == "bf16[129x65] strides [65,1]");

  TensorView t{nullptr, DType::f16, {3, 2}, {1, 3}};
  REQUIRE(t.effective_strides() == std::vector<int64_t>{1, 3});
  REQUIRE(t.describe() == "f16[3x2] strides [1,3]");
}

TEST_CASE("a strided view addresses the elements it claims", "[tensor]") {
  HostTensor buf(DType::f32, {4, 5});
  for (int64_t i = 0; i < buf.numel(); ++i) buf.set(i, float(i));

  // Columns 1..2 of the 4x5 buffer.
  TensorView cols{static_cast<float*>(buf.data()) + 1, DType::f32, {4, 2}, {5, 1}};
  REQUIRE(cols.offset_of({0, 0}) == 0);
  REQUIRE(cols.offset_of({3, 1}) == 16);
  REQUIRE(load_as_f32(cols.data, cols.dtype, cols.offset_of({2, 1})) == 12.0f);

  // The transpose of the first 2x3 block, as a 3x2 view with swapped strides.
  TensorView tr{buf.data(), DType::f32, {3, 2}, {1, 5}};
  REQUIRE(load_as_f32(tr.data, tr.dtype, tr.offset_of({2, 1})) == 7.0f);
  REQUIRE(load_as_f32(tr.data, tr.dtype, tr.offset_of({1, 0})) == 1.0f);
}

TEST_CASE("offset_of rejects an index of the wrong rank or out of range", "[tensor]") {
  TensorView v{nullptr, DType::f32, {2, 3}, {}};
  REQUIRE(v.offset_of({1, 2}) == 5);
  try {
    v.offset_of({1});
    FAIL("expected kiln::Error");
  } catch (const Error& e) {
    REQUIRE(e.kind() == ErrorKind::InvalidArgument);
    REQUIRE_THAT(e.what(), Catch::Contains("rank 2"));
  }
  REQUIRE_THROWS_AS(v.offset_of({2, 0}), Error);
  REQUIRE_THROWS_AS(v.offset_of({0, -1}), Error);
}

TEST_CASE("a host tensor starts zeroed and its view covers it", "[tensor]") {
  HostTensor t(DType::bf16, {3, 4});
  REQUIRE(t.numel() == 12);
  for (int64_t i = 0; i < t.numel(); ++i) REQUIRE(t.get(i) == 0.0f);
  TensorView v = t.view();
  REQUIRE(v.data == t.data());
  REQUIRE(v.dtype == DType::bf16);
  REQUIRE(v.dims == std::vector<int64_t>{3, 4});
  REQUIRE(v.numel() == 12);
  REQUIRE_THROWS_AS(HostTensor(DType::f32, {2, -1}), Error);
}

TEST_CASE("fill_random is reproducible, in range and representable", "[tensor]") {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    HostTensor a(dt, {17, 9}), b(dt, {17, 9}), c(dt, {17, 9});
    a.fill_random(42, -2.0f, 3.0f);
    b.fill_random(42, -2.0f, 3.0f);
    c.fill_random(43, -2.0f, 3.0f);
    REQUIRE(a.to_f64() == b.to_f64());
    REQUIRE(a.to_f64() != c.to_f64());
    bool varied = false;
    for (int64_t i = 0; i < a.numel(); ++i) {
      const float x = a.get(i);
      REQUIRE(x >= -2.0f);
      REQUIRE(x <= 3.0f); // rounding to a narrow dtype may land on hi itself
      if (dt == DType::bf16) REQUIRE(bf16_to_f32(f32_to_bf16(x)) == x);
      if (dt == DType::f16) REQUIRE(f16_to_f32(f32_to_f16(x)) == x);
      varied |= x != a.get(0);
    }
    REQUIRE(varied);
  }
}

TEST_CASE("poison makes every element a NaN in every dtype", "[tensor]") {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    HostTensor t(dt, {5, 7});
    t.fill_random(1);
    t.poison();
    for (int64_t i = 0; i < t.numel(); ++i) REQUIRE(std::isnan(t.get(i)));
    for (double x : t.to_f64()) REQUIRE(std::isnan(x));
  }
  // i32 has no NaN: poison is its most negative value, never a length or an offset.
  HostTensor t(DType::i32, {3});
  t.poison();
  for (int64_t i = 0; i < t.numel(); ++i) REQUIRE(t.get(i) == -2147483648.0f);
}

TEST_CASE("to_f64 widens exactly in row-major order", "[tensor]") {
  HostTensor t(DType::f16, {2, 3});
  for (int64_t i = 0; i < 6; ++i) t.set(i, 0.5f * float(i) + 0.1f);
  const std::vector<double> d = t.to_f64();
  REQUIRE(d.size() == 6);
  for (int64_t i = 0; i < 6; ++i)
    REQUIRE(d[size_t(i)] == double(f16_to_f32(f32_to_f16(0.5f * float(i) + 0.1f))));
  REQUIRE(d[0] == 0.0999755859375);
}

TEST_CASE("sizes that overflow int64 are errors, never wrapped counts", "[tensor][errors]") {
  const int64_t big = int64_t(1) << 62;
  for (const std::vector<int64_t>& dims :
       std::vector<std::vector<int64_t>>{{big, 4}, {3037000500, 3037000500}, {INT64_MAX, 2}}) {
    TensorView v{nullptr, DType::f32, dims, {}};
    CHECK_THROWS_WITH(v.numel(), Contains("more elements than an int64 counts"));
    CHECK_THROWS_AS(HostTensor(DType::f32, dims), Error);
  }
  // Row-major strides overflow from three dims on: the first is the product of the others.
  CHECK_THROWS_WITH(row_major_strides({2, big, 4}), Contains("beyond int64"));
  CHECK_THAT((TensorView{nullptr, DType::f32, {2, big, 4}, {}}.describe()), Contains("beyond int64"));
  CHECK(TensorView{nullptr, DType::f32, {big, 0}, {}}.numel() == 0); // an empty tensor is empty
  // Representable, but more memory than there is: a kiln::Error, not std::bad_alloc or the
  // process ended on first touch.
  try {
    HostTensor(DType::f32, {int64_t(1) << 40, 1024});
    FAIL("allocated 4 PiB");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Runtime);
    CHECK_THAT(e.what(), Contains("f32[1099511627776x1024]") && Contains("bytes"));
  }
}
