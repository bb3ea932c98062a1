#pragma once
// Internal: pipeline pieces every backend shares.
#include <string>

#include "Compiler/KernelImpl.h"

#include <memory>

namespace mlir {
class Pass;
}

namespace kiln::detail {

/// kiln-expand-composites + canonicalize on every tile.kernel of `m`.
void runTilePasses(mlir::ModuleOp m, DiagnosticCollector& diags, const std::string& name);

/// MLIR's canonicalizer without its region-branch successor-input patterns: on loops and
/// branches carrying a tile's fragments (an attention accumulator: 64+ values) they cost
/// time quadratic in the count (70% of lowering the portable causal attention kernel);
/// LLVM removes the dead and duplicate loop values they would.
std::unique_ptr<mlir::Pass> createCanonicalizer();

/// Text of an op (a module, a gpu.module, ...).
std::string printOp(mlir::Operation* op);

} // namespace kiln::detail
