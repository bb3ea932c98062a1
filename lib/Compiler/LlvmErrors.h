#pragma once
// Internal: LLVM's fatal and out-of-memory errors become kiln::Error (CompileFailed).

namespace kiln::detail {

/// Installs kiln's handlers in (kiln's private copy of) LLVM, once per process. Called
/// before any MLIR context is made, so every compile runs under them.
void installLlvmErrorHandlers();

} // namespace kiln::detail
