#pragma once
// Internal: pipeline pieces every backend shares.
#include <string>

#include "Compiler/KernelImpl.h"

namespace kiln::detail {

/// kiln-expand-composites + canonicalize on every tile.kernel of `m`.
void runTilePasses(mlir::ModuleOp m, DiagnosticCollector& diags, const std::string& name);

/// Text of an op (a module, a gpu.module, ...).
std::string printOp(mlir::Operation* op);

} // namespace kiln::detail
