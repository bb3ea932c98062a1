#include "Transforms/ScalarMath.h"

#include "Dialect/Tile/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"

namespace kiln {

using namespace mlir;
using namespace kiln::tile;

arith::CmpFPredicate cmpFPredicate(StringRef predicate) {
  return llvm::StringSwitch<arith::CmpFPredicate>(predicate)
      .Case("lt", arith::CmpFPredicate::OLT)
      .Case("le", arith::CmpFPredicate::OLE)
      .Case("gt", arith::CmpFPredicate::OGT)
      .Case("ge", arith::CmpFPredicate::OGE)
      .Case("eq", arith::CmpFPredicate::OEQ)
      .Default(arith::CmpFPredicate::UNE);
}

arith::CmpIPredicate cmpIPredicate(StringRef predicate) {
  return llvm::StringSwitch<arith::CmpIPredicate>(predicate)
      .Case("lt", arith::CmpIPredicate::slt)
      .Case("le", arith::CmpIPredicate::sle)
      .Case("gt", arith::CmpIPredicate::sgt)
      .Case("ge", arith::CmpIPredicate::sge)
      .Case("eq", arith::CmpIPredicate::eq)
      .Default(arith::CmpIPredicate::ne);
}

bool isScalarMathOp(Operation* op) {
  return isa<NegOp, ExpOp, Exp2Op, LogOp, SqrtOp, RsqrtOp, TanhOp, AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp,
             ScaleOp, CastOp, CmpOp, SelectOp>(op);
}

Value emitScalar(OpBuilder& b, Location loc, Operation* op, ArrayRef<Value> x) {
  auto f32 = [&](double v) -> Value {
    Type t = x[0].getType();
    if (auto vt = dyn_cast<VectorType>(t))
      return b.create<arith::ConstantOp>(loc, DenseElementsAttr::get(vt, b.getF32FloatAttr(float(v))));
    return b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(float(v)));
  };
  return llvm::TypeSwitch<Operation*, Value>(op)
      .Case<NegOp>([&](auto) { return b.create<arith::NegFOp>(loc, x[0]); })
      .Case<ExpOp>([&](auto) { return b.create<math::ExpOp>(loc, x[0]); })
      .Case<Exp2Op>([&](auto) { return b.create<math::Exp2Op>(loc, x[0]); })
      .Case<LogOp>([&](auto) { return b.create<math::LogOp>(loc, x[0]); })
      .Case<SqrtOp>([&](auto) { return b.create<math::SqrtOp>(loc, x[0]); })
      .Case<RsqrtOp>([&](auto) { return b.create<arith::DivFOp>(loc, f32(1.0), b.create<math::SqrtOp>(loc, x[0])); })
      .Case<TanhOp>([&](auto) { return b.create<math::TanhOp>(loc, x[0]); })
      .Case<AddOp>([&](auto) { return b.create<arith::AddFOp>(loc, x[0], x[1]); })
      .Case<SubOp>([&](auto) { return b.create<arith::SubFOp>(loc, x[0], x[1]); })
      .Case<MulOp>([&](auto) { return b.create<arith::MulFOp>(loc, x[0], x[1]); })
      .Case<DivOp>([&](auto) { return b.create<arith::DivFOp>(loc, x[0], x[1]); })
      .Case<MaxOp>([&](auto) { return b.create<arith::MaximumFOp>(loc, x[0], x[1]); })
      .Case<MinOp>([&](auto) { return b.create<arith::MinimumFOp>(loc, x[0], x[1]); })
      .Case<ScaleOp>([&](ScaleOp s) { return b.create<arith::MulFOp>(loc, x[0], f32(s.getFactor().convertToDouble())); })
      .Case<CastOp>([&](auto) { return x[0]; })
      .Case<CmpOp>([&](CmpOp c) {
        Value holds = b.create<arith::CmpFOp>(loc, cmpFPredicate(c.getPredicate()), x[0], x[1]);
        return b.create<arith::SelectOp>(loc, holds, f32(1.0), f32(0.0)).getResult();
      })
      .Case<SelectOp>([&](auto) {
        Value set = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNE, x[0], f32(0.0));
        return b.create<arith::SelectOp>(loc, set, x[1], x[2]).getResult();
      })
      .Default([](Operation*) { return Value(); });
}

} // namespace kiln
