#pragma once
// Internal: the scalar math of kiln's elementwise tile ops, emitted in one place for every
// backend (the CPU loops, the CUDA register lowering, the Hopper GEMM epilogue), so that
// one op means the same arithmetic everywhere.
//
// Invariant: operands and result are f32 scalars (or f32 vectors of one shape); a backend
// widens its elements to f32 before and rounds once after (kiln/dtype.hpp). Composite ops
// (relu, gelu, silu, sigmoid) are expanded by kiln-expand-composites before any backend
// runs, so they never reach here.
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"

namespace kiln {

/// True when `op` is an elementwise tile op emitScalar handles (cast included: a no-op on
/// f32 values).
bool isScalarMathOp(mlir::Operation* op);

/// The f32 result of the elementwise tile op `op` applied to the f32 values `x` (one per
/// operand of `op`). Null when `op` is not an elementwise op emitScalar knows.
mlir::Value emitScalar(mlir::OpBuilder& b, mlir::Location loc, mlir::Operation* op, mlir::ArrayRef<mlir::Value> x);

/// tile.cmp's predicate ("lt", "le", "gt", "ge", "eq", "ne") on floats: ordered but for
/// "ne", as C++'s float operators (a NaN compares false, and not-equal).
mlir::arith::CmpFPredicate cmpFPredicate(llvm::StringRef predicate);
/// The same on integers (signed): for index tiles a backend keeps as integers.
mlir::arith::CmpIPredicate cmpIPredicate(llvm::StringRef predicate);

} // namespace kiln
