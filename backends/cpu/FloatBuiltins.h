#pragma once
// Internal: kiln's definitions of the compiler-rt float conversion helpers.
//
// Where the JIT's target CPU has no instruction for a conversion (f32 -> bf16 without
// AVX512-BF16; f16 <-> f32 without F16C), LLVM emits a call to a compiler-rt builtin such
// as __truncsfbf2. The JIT cannot count on finding compiler-rt in the process, so kiln
// defines each one (round to nearest even, NaN kept NaN, the same bits as kiln::f32_to_bf16
// and friends) and hands their addresses to every JIT it makes. Which CPU the JIT targets
// then never decides whether a kernel links.
#include <utility>
#include <vector>

namespace kiln::cpu {

/// {symbol name, address} of every conversion helper kiln defines.
const std::vector<std::pair<const char*, void*>>& floatBuiltins();

} // namespace kiln::cpu
