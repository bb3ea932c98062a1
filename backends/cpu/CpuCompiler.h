#pragma once
// Internal: the CPU backend. Tile IR -> loops -> LLVM dialect -> LLVM IR -> ORC JIT.
#include <memory>
#include <string>

#include "Compiler/KernelImpl.h"

namespace kiln::cpu {

/// "cpu (x86_64-pc-linux-gnu sapphirerapids JIT, f16c)", or why the CPU backend cannot
/// run here.
std::string describeHost();

/// Text of the kernel's IR at `stage` (tile, mlir after lowering to loops, llvm).
std::string emit(const Kernel& kernel, Stage stage);

/// Compiles for the host CPU. Throws kiln::Error(CompileFailed) with the pass's
/// diagnostics when a stage fails.
std::unique_ptr<detail::CompiledImpl> compile(const Kernel& kernel);

} // namespace kiln::cpu
