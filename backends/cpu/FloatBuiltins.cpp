#include "FloatBuiltins.h"

#include "kiln/dtype.hpp"

#include <cstdint>
#include <cstring>

// LLVM's x86-64 libcalls pass and return half and bfloat in XMM registers, as clang does
// for _Float16 and __bf16: declaring the helpers with those types gives that ABI.
#if !defined(__clang__) && !(defined(__GNUC__) && __GNUC__ >= 13)
#error "FloatBuiltins.cpp needs _Float16 and __bf16 (clang, or GCC 13 or newer)"
#endif

namespace kiln::cpu {

namespace {

template <class To, class From> To bitCast(From v) {
  static_assert(sizeof(To) == sizeof(From));
  To out;
  std::memcpy(&out, &v, sizeof out);
  return out;
}

// The names compiler-rt gives them; internal linkage, so they never clash with a real
// compiler-rt linked into the engine's process. The JIT gets their addresses.
__bf16 truncsfbf2(float v) { return bitCast<__bf16>(f32_to_bf16(v)); }
float extendbfsf2(__bf16 v) { return bf16_to_f32(bitCast<uint16_t>(v)); }
_Float16 truncsfhf2(float v) { return bitCast<_Float16>(f32_to_f16(v)); }
float extendhfsf2(_Float16 v) { return f16_to_f32(bitCast<uint16_t>(v)); }

} // namespace

const std::vector<std::pair<const char*, void*>>& floatBuiltins() {
  static const std::vector<std::pair<const char*, void*>> table = {
      {"__truncsfbf2", reinterpret_cast<void*>(&truncsfbf2)},
      {"__extendbfsf2", reinterpret_cast<void*>(&extendbfsf2)},
      {"__truncsfhf2", reinterpret_cast<void*>(&truncsfhf2)},
      {"__extendhfsf2", reinterpret_cast<void*>(&extendhfsf2)},
  };
  return table;
}

} // namespace kiln::cpu
