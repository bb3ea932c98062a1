#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "kiln/export.hpp"

namespace kiln {

/// Element types a kernel argument or tile may have. dot and the reductions accumulate
/// in f32 whatever their inputs are; elementwise math runs in f32 and rounds once.
/// i32 is for integer inputs a kernel reads one element at a time as an index (per-sequence
/// lengths, offsets: dsl::Builder::read); it is not a tile type.
enum class DType : uint8_t { f32, f16, bf16, i32 };

constexpr int64_t size_of(DType t) { return t == DType::f32 || t == DType::i32 ? 4 : 2; }
/// Whether `t` is a floating-point type (a tile's, a loaded tensor's).
constexpr bool is_float(DType t) { return t != DType::i32; }
KILN_API const char* to_string(DType t);
/// "f32", "f16", "bf16", "i32" -> DType; anything else -> nullopt.
KILN_API std::optional<DType> parse_dtype(std::string_view name);

/// Round-to-nearest-even conversions, NaN preserved (quiet). Written here so that the
/// host reference and the JIT'd kernels agree bit for bit on what an input element is.
KILN_API uint16_t f32_to_bf16(float v);
KILN_API float bf16_to_f32(uint16_t v);
KILN_API uint16_t f32_to_f16(float v);
KILN_API float f16_to_f32(uint16_t v);

/// Reads element `i` of a buffer of type `t` as float / writes it from float (rounded; to
/// the nearest integer for i32, saturating; exact for integers below 2^24).
KILN_API float load_as_f32(const void* data, DType t, int64_t i);
KILN_API void store_from_f32(void* data, DType t, int64_t i, float v);

} // namespace kiln
