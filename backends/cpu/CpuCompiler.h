#pragma once
// Internal: the CPU backend. Tile IR -> loops -> LLVM dialect -> LLVM IR -> ORC JIT.
#include <memory>
#include <string>

#include "Compiler/KernelImpl.h"

namespace kiln::cpu {

struct CpuTarget;

/// "cpu (x86_64-pc-linux-gnu sapphirerapids JIT)"; a forced target says so.
std::string describe(const CpuTarget& target);

/// Text of the kernel's IR at `stage` (tile, mlir after lowering to loops, llvm).
std::string emit(const Kernel& kernel, Stage stage);

/// Compiles for `target`. Throws kiln::Error(CompileFailed) with the pass's diagnostics
/// when a stage fails.
std::unique_ptr<detail::CompiledImpl> compile(const Kernel& kernel, const CpuTarget& target);

} // namespace kiln::cpu
