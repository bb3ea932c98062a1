#include "kiln/dtype.hpp"

#include <climits>
#include <cmath>

#include <cstring>

namespace kiln {

// All conversions work on bit patterns: compiler half types and the FPU rounding mode
// must not decide what an input element is, or host and device could disagree.

namespace {

uint32_t bits_of(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

float float_of(uint32_t u) {
  float v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

constexpr uint32_t kF32AbsMask = 0x7FFFFFFFu;
constexpr uint32_t kF32Inf = 0x7F800000u;
constexpr uint32_t kF32QuietBit = 0x00400000u;

} // namespace

const char* to_string(DType t) {
  switch (t) {
  case DType::f32: return "f32";
  case DType::f16: return "f16";
  case DType::bf16: return "bf16";
  case DType::i32: return "i32";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  if (name == "f32") return DType::f32;
  if (name == "f16") return DType::f16;
  if (name == "bf16") return DType::bf16;
  if (name == "i32") return DType::i32;
  return std::nullopt;
}

uint16_t f32_to_bf16(float v) {
  uint32_t u = bits_of(v);
  if ((u & kF32AbsMask) > kF32Inf) // NaN: truncating could clear every payload bit
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  // Adding 0x7FFF plus the kept lsb rounds ties to even; a carry into the exponent is
  // exactly right, including max-finite -> Inf.
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float bf16_to_f32(uint16_t v) {
  uint32_t u = static_cast<uint32_t>(v) << 16;
  if ((u & kF32AbsMask) > kF32Inf) u |= kF32QuietBit;
  return float_of(u);
}

uint16_t f32_to_f16(float v) {
  const uint32_t u = bits_of(v);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & kF32AbsMask;

  if (a > kF32Inf) // NaN: keep the top payload bits, force quiet
    return static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  if (a >= 0x47800000u) // >= 2^16 (or Inf): beyond any rounding to 65504
    return static_cast<uint16_t>(sign | 0x7C00u);

  if (a >= 0x38800000u) { // >= 2^-14: f16 normal (or rounds up to Inf below)
    uint32_t h = (a >> 13) - (112u << 10); // rebias exponent 127 -> 15
    const uint32_t rest = a & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h; // carry may give Inf
    return static_cast<uint16_t>(sign | h);
  }
  if (a <= 0x33000000u) // <= 2^-25: half of the smallest subnormal ties to 0
    return sign;

  // Subnormal: value = mantissa * 2^(exp-150); the f16 subnormal unit is 2^-24.
  const uint32_t exp = a >> 23;
  const uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - exp; // 14..24
  uint32_t h = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (h & 1u))) ++h; // 0x3FF+1 is the min normal
  return static_cast<uint16_t>(sign | h);
}

float f16_to_f32(uint16_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x8000u) << 16;
  const uint32_t exp = (v >> 10) & 0x1Fu;
  uint32_t mant = v & 0x3FFu;

  if (exp == 0x1Fu) {
    const uint32_t nan_quiet = mant ? kF32QuietBit : 0u;
    return float_of(sign | kF32Inf | (mant << 13) | nan_quiet);
  }
  if (exp == 0) {
    if (mant == 0) return float_of(sign);
    int e = 1; // normalize the subnormal: every f16 value is an f32 normal
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    mant &= 0x3FFu;
    return float_of(sign | (static_cast<uint32_t>(e + 112) << 23) | (mant << 13));
  }
  return float_of(sign | ((exp + 112u) << 23) | (mant << 13));
}

float load_as_f32(const void* data, DType t, int64_t i) {
  const auto* p = static_cast<const unsigned char*>(data) + i * size_of(t);
  if (t == DType::f32) {
    float v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  if (t == DType::i32) {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return float(v);
  }
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return t == DType::f16 ? f16_to_f32(h) : bf16_to_f32(h);
}

void store_from_f32(void* data, DType t, int64_t i, float v) {
  auto* p = static_cast<unsigned char*>(data) + i * size_of(t);
  if (t == DType::f32) {
    std::memcpy(p, &v, sizeof v);
    return;
  }
  if (t == DType::i32) {
    // Nearest, ties to even; NaN is 0 and the rest saturate (a cast would be undefined).
    const float r = std::nearbyint(v);
    const int32_t x = std::isnan(r) ? 0 : r >= 2147483647.0f ? INT32_MAX : r <= -2147483648.0f ? INT32_MIN : int32_t(r);
    std::memcpy(p, &x, sizeof x);
    return;
  }
  const uint16_t h = t == DType::f16 ? f32_to_f16(v) : f32_to_bf16(v);
  std::memcpy(p, &h, sizeof h);
}

} // namespace kiln
