#include "Transforms/ScalarMath.h"

#include "Dialect/Tile/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/TypeSwitch.h"

namespace kiln {

using namespace mlir;
using namespace kiln::tile;

namespace {
/// tile.cmp's predicates on floats (ordered but for "ne") and on integers (signed).
struct Predicate {
  StringRef name;
  arith::CmpFPredicate f;
  arith::CmpIPredicate i;
};
constexpr Predicate kPredicates[] = {
    {"lt", arith::CmpFPredicate::OLT, arith::CmpIPredicate::slt},
    {"le", arith::CmpFPredicate::OLE, arith::CmpIPredicate::sle},
    {"gt", arith::CmpFPredicate::OGT, arith::CmpIPredicate::sgt},
    {"ge", arith::CmpFPredicate::OGE, arith::CmpIPredicate::sge},
    {"eq", arith::CmpFPredicate::OEQ, arith::CmpIPredicate::eq},
    {"ne", arith::CmpFPredicate::UNE, arith::CmpIPredicate::ne},
};
const Predicate& predicate(StringRef name) {
  for (const Predicate& p : kPredicates)
    if (p.name == name) return p;
  return kPredicates[5]; // the verifier admits no other name; "ne" as before
}
} // namespace

arith::CmpFPredicate cmpFPredicate(StringRef name) { return predicate(name).f; }
arith::CmpIPredicate cmpIPredicate(StringRef name) { return predicate(name).i; }

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
