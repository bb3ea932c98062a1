#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "kiln/dtype.hpp"

using namespace kiln;

namespace {

uint32_t to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

bool is_bf16_nan(uint16_t h) { return (h & 0x7F80u) == 0x7F80u && (h & 0x7Fu) != 0; }
bool is_f16_nan(uint16_t h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0; }

// Independent check of "round to nearest, ties to even": the result must be at least
// as close to x as both neighbouring codes, and on a tie it must be the even one.
template <typename Widen>
void require_nearest_even(float x, uint16_t h, Widen widen) {
  const double d = std::fabs(double(x) - double(widen(h)));
  for (int step : {-1, 1}) {
    const uint16_t n = static_cast<uint16_t>(h + step);
    if ((n & 0x7FFFu) == 0x7FFFu || ((n ^ h) & 0x8000u)) continue; // crossed sign or wrapped
    const float wn = widen(n);
    if (std::isnan(wn)) continue;
    const double dn = std::fabs(double(x) - double(wn));
    INFO("x=" << x << " h=" << h << " neighbour=" << n);
    REQUIRE(d <= dn);
    if (d == dn) REQUIRE((h & 1u) == 0);
  }
}

} // namespace

TEST_CASE("dtype names round trip through parse_dtype", "[dtype]") {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::i32})
    REQUIRE(parse_dtype(to_string(t)) == t);
  REQUIRE(std::string(to_string(DType::bf16)) == "bf16");
  REQUIRE(std::string(to_string(DType::i32)) == "i32");
  REQUIRE(size_of(DType::i32) == 4);
  REQUIRE_FALSE(is_float(DType::i32));
  REQUIRE(is_float(DType::bf16));
  REQUIRE_FALSE(parse_dtype("F32").has_value());
  REQUIRE_FALSE(parse_dtype("f64").has_value());
  REQUIRE_FALSE(parse_dtype("").has_value());
  REQUIRE(size_of(DType::f32) == 4);
  REQUIRE(size_of(DType::f16) == 2);
  REQUIRE(size_of(DType::bf16) == 2);
}

TEST_CASE("bf16 conversion rounds to nearest even", "[dtype]") {
  REQUIRE(f32_to_bf16(1.0f) == 0x3F80);
  REQUIRE(f32_to_bf16(from_bits(0x3F808000u)) == 0x3F80); // tie, lsb even: down
  REQUIRE(f32_to_bf16(from_bits(0x3F818000u)) == 0x3F82); // tie, lsb odd: up
  REQUIRE(f32_to_bf16(from_bits(0x3F808001u)) == 0x3F81); // just above the tie
  REQUIRE(f32_to_bf16(from_bits(0x3F807FFFu)) == 0x3F80); // just below the tie
  REQUIRE(f32_to_bf16(-1.0f) == 0xBF80);
  REQUIRE(f32_to_bf16(-0.0f) == 0x8000);

  std::mt19937 gen(1234);
  for (int i = 0; i < 200000; ++i) {
    const float x = from_bits(static_cast<uint32_t>(gen()));
    if (!std::isfinite(x) || std::fabs(x) > 3.3e38f) continue;
    require_nearest_even(x, f32_to_bf16(x), bf16_to_f32);
  }
}

TEST_CASE("bf16 keeps NaN quiet and Inf infinite, and overflows to Inf", "[dtype]") {
  REQUIRE(f32_to_bf16(std::numeric_limits<float>::infinity()) == 0x7F80);
  REQUIRE(f32_to_bf16(-std::numeric_limits<float>::infinity()) == 0xFF80);
  REQUIRE(f32_to_bf16(std::numeric_limits<float>::max()) == 0x7F80);
  REQUIRE(f32_to_bf16(from_bits(0x7FC00000u)) == 0x7FC0);
  // A signalling NaN whose payload lies only in the truncated bits must stay a NaN.
  const uint16_t snan = f32_to_bf16(from_bits(0x7F800001u));
  REQUIRE(is_bf16_nan(snan));
  REQUIRE((snan & 0x0040u) != 0);
  REQUIRE((f32_to_bf16(from_bits(0xFF800001u)) & 0x8000u) != 0);
  REQUIRE(std::isnan(bf16_to_f32(0x7F81)));
  REQUIRE((to_bits(bf16_to_f32(0x7F81)) & 0x00400000u) != 0); // widened NaN is quiet
  REQUIRE(std::isinf(bf16_to_f32(0xFF80)));
  REQUIRE(bf16_to_f32(0xFF80) < 0);
}

TEST_CASE("every bf16 value survives a round trip through f32", "[dtype]") {
  for (uint32_t h = 0; h <= 0xFFFFu; ++h) {
    const uint16_t b = static_cast<uint16_t>(h);
    const float f = bf16_to_f32(b);
    if (is_bf16_nan(b)) {
      REQUIRE(std::isnan(f));
      REQUIRE(is_bf16_nan(f32_to_bf16(f)));
    } else {
      REQUIRE(f32_to_bf16(f) == b);
    }
  }
}

TEST_CASE("f16 conversion rounds to nearest even", "[dtype]") {
  REQUIRE(f32_to_f16(1.0f) == 0x3C00);
  REQUIRE(f32_to_f16(-2.0f) == 0xC000);
  REQUIRE(f32_to_f16(1.0f + 0x1p-11f) == 0x3C00);     // tie, lsb even: down
  REQUIRE(f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3C02); // tie, lsb odd: up
  REQUIRE(f32_to_f16(std::nextafter(1.0f + 0x1p-11f, 2.0f)) == 0x3C01);
  REQUIRE(f32_to_f16(0.1f) == 0x2E66);

  std::mt19937 gen(99);
  std::uniform_real_distribution<float> mag(-26.0f, 16.0f);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::exp2(mag(gen)) * (i % 2 ? -1.0f : 1.0f);
    if (std::fabs(x) >= 65504.0f) continue;
    require_nearest_even(x, f32_to_f16(x), f16_to_f32);
  }
}

TEST_CASE("f16 overflows to Inf at 65520 and keeps NaN and Inf", "[dtype]") {
  REQUIRE(f32_to_f16(65504.0f) == 0x7BFF);
  REQUIRE(f32_to_f16(65519.0f) == 0x7BFF);
  REQUIRE(f32_to_f16(65520.0f) == 0x7C00); // the tie rounds to even, which is Inf
  REQUIRE(f32_to_f16(1e6f) == 0x7C00);
  REQUIRE(f32_to_f16(-1e30f) == 0xFC00);
  REQUIRE(f32_to_f16(std::numeric_limits<float>::infinity()) == 0x7C00);
  REQUIRE(f32_to_f16(-std::numeric_limits<float>::infinity()) == 0xFC00);
  const uint16_t qnan = f32_to_f16(std::numeric_limits<float>::quiet_NaN());
  REQUIRE(is_f16_nan(qnan));
  REQUIRE((qnan & 0x0200u) != 0);
  REQUIRE(is_f16_nan(f32_to_f16(from_bits(0x7F800001u)))); // payload below f16 precision
  REQUIRE(std::isnan(f16_to_f32(0x7C01)));
  REQUIRE((to_bits(f16_to_f32(0x7C01)) & 0x00400000u) != 0); // widened NaN is quiet
  REQUIRE(std::isinf(f16_to_f32(0xFC00)));
}

TEST_CASE("f16 subnormals convert exactly and round correctly", "[dtype]") {
  REQUIRE(f16_to_f32(0x0001) == 0x1p-24f);
  REQUIRE(f16_to_f32(0x03FF) == 1023 * 0x1p-24f);
  REQUIRE(f16_to_f32(0x0400) == 0x1p-14f);
  REQUIRE(f16_to_f32(0x8001) == -0x1p-24f);

  REQUIRE(f32_to_f16(0x1p-24f) == 0x0001);
  REQUIRE(f32_to_f16(-0x1p-24f) == 0x8001);
  REQUIRE(f32_to_f16(0x1p-25f) == 0x0000);                             // tie to even zero
  REQUIRE(f32_to_f16(std::nextafter(0x1p-25f, 1.0f)) == 0x0001);        // above the tie
  REQUIRE(f32_to_f16(0x1p-26f) == 0x0000);
  REQUIRE(f32_to_f16(3 * 0x1p-25f) == 0x0002);                         // tie, 1 is odd
  REQUIRE(f32_to_f16(5 * 0x1p-25f) == 0x0002);                         // tie, 2 is even
  REQUIRE(f32_to_f16(1023.5f * 0x1p-24f) == 0x0400);                   // rounds into normal
  REQUIRE(f32_to_f16(0x1p-14f) == 0x0400);
  REQUIRE(f32_to_f16(1e-30f) == 0x0000);
  REQUIRE(f32_to_f16(-1e-30f) == 0x8000);
}

TEST_CASE("every f16 value survives a round trip through f32", "[dtype]") {
  for (uint32_t h = 0; h <= 0xFFFFu; ++h) {
    const uint16_t b = static_cast<uint16_t>(h);
    const float f = f16_to_f32(b);
    if (is_f16_nan(b)) {
      REQUIRE(std::isnan(f));
      REQUIRE(is_f16_nan(f32_to_f16(f)));
    } else {
      REQUIRE(f32_to_f16(f) == b);
    }
  }
}

TEST_CASE("i32 elements store the nearest integer, saturate, make NaN 0, and read back exactly", "[dtype]") {
  int32_t buf[8] = {};
  const float in[8] = {2.5f, 3.5f, -7.4f, 16777216.0f, 3e9f, -3e9f, NAN, 1e30f};
  const int32_t want[8] = {2, 4, -7, 16777216, INT32_MAX, INT32_MIN, 0, INT32_MAX};
  for (int i = 0; i < 8; ++i) store_from_f32(buf, DType::i32, i, in[i]);
  for (int i = 0; i < 8; ++i) {
    INFO(in[i]);
    CHECK(buf[i] == want[i]);
  }
  CHECK(load_as_f32(buf, DType::i32, 2) == -7.0f);
  CHECK(load_as_f32(buf, DType::i32, 3) == 16777216.0f);
}

TEST_CASE("load_as_f32 and store_from_f32 address and round each dtype", "[dtype]") {
  unsigned char buf[16] = {};
  store_from_f32(buf, DType::f32, 2, 1.25f);
  REQUIRE(load_as_f32(buf, DType::f32, 2) == 1.25f);
  REQUIRE(load_as_f32(buf, DType::f32, 1) == 0.0f);

  store_from_f32(buf, DType::bf16, 3, 1.0f + 0x1p-8f); // tie -> 1.0
  REQUIRE(load_as_f32(buf, DType::bf16, 3) == 1.0f);
  store_from_f32(buf, DType::bf16, 4, 3.0f);
  uint16_t raw;
  std::memcpy(&raw, buf + 8, 2);
  REQUIRE(raw == 0x4040);

  store_from_f32(buf, DType::f16, 7, 0.1f);
  std::memcpy(&raw, buf + 14, 2);
  REQUIRE(raw == 0x2E66);
  REQUIRE(load_as_f32(buf, DType::f16, 7) == Approx(0.0999755859375).epsilon(0));
}
