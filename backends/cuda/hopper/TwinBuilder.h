#pragma once
// Internal: what the sm_90a twins' emitters (hopper/Emitter.h for GEMMs, AttentionSm90.cpp
// for attention) build their kernels with: an OpBuilder at the tile kernel's location and
// short names for the 32-bit index arithmetic, comparisons and scf.if they emit throughout.
#include "Dialect/Tile/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

namespace kiln::hopper {

class TwinBuilder {
protected:
  explicit TwinBuilder(tile::KernelOp kernel) : loc_(kernel.getLoc()), b_(kernel.getContext()) {}

  mlir::Location loc_;
  mlir::OpBuilder b_;

  mlir::Value i32(int64_t v) { return b_.create<mlir::arith::ConstantIntOp>(loc_, v, 32); }
  mlir::Value i64(int64_t v) { return b_.create<mlir::arith::ConstantIntOp>(loc_, v, 64); }
  mlir::Value add(mlir::Value a, mlir::Value b) { return b_.create<mlir::arith::AddIOp>(loc_, a, b); }
  mlir::Value sub(mlir::Value a, mlir::Value b) { return b_.create<mlir::arith::SubIOp>(loc_, a, b); }
  mlir::Value mul(mlir::Value a, mlir::Value b) { return b_.create<mlir::arith::MulIOp>(loc_, a, b); }
  mlir::Value divu(mlir::Value a, mlir::Value b) { return b_.create<mlir::arith::DivUIOp>(loc_, a, b); }
  mlir::Value remu(mlir::Value a, mlir::Value b) { return b_.create<mlir::arith::RemUIOp>(loc_, a, b); }
  mlir::Value cmp(mlir::arith::CmpIPredicate p, mlir::Value a, mlir::Value b) {
    return b_.create<mlir::arith::CmpIOp>(loc_, p, a, b);
  }
  mlir::Value ult(mlir::Value a, mlir::Value b) { return cmp(mlir::arith::CmpIPredicate::ult, a, b); }
  mlir::Value ule(mlir::Value a, mlir::Value b) { return cmp(mlir::arith::CmpIPredicate::ule, a, b); }
  mlir::Value eq(mlir::Value a, mlir::Value b) { return cmp(mlir::arith::CmpIPredicate::eq, a, b); }
  mlir::Value ne(mlir::Value a, mlir::Value b) { return cmp(mlir::arith::CmpIPredicate::ne, a, b); }
  mlir::Value ext64(mlir::Value v) { return b_.create<mlir::arith::ExtUIOp>(loc_, b_.getI64Type(), v); }
  /// `base` + `off` bytes.
  mlir::Value byteAt(mlir::Value base, mlir::Value off) {
    return b_.create<mlir::LLVM::GEPOp>(loc_, base.getType(), b_.getI8Type(), base, mlir::ValueRange{off});
  }
  /// scf.if on `cond` with `then` (and `otherwise`) emitted through b_ inside its regions.
  template <class F> void ifThen(mlir::Value cond, F&& then) {
    auto op = b_.create<mlir::scf::IfOp>(loc_, cond, /*withElseRegion=*/false);
    mlir::OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPoint(op.thenBlock()->getTerminator());
    then();
  }
  template <class F, class G> void ifThenElse(mlir::Value cond, F&& then, G&& otherwise) {
    auto op = b_.create<mlir::scf::IfOp>(loc_, cond, /*withElseRegion=*/true);
    mlir::OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPoint(op.thenBlock()->getTerminator());
    then();
    b_.setInsertionPoint(op.elseBlock()->getTerminator());
    otherwise();
  }
};

} // namespace kiln::hopper
