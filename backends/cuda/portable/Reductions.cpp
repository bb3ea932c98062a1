// The portable CUDA lowering: reductions along a dim (sum, max), through shared memory.
// (portable/Lowering.h)
#include "portable/Lowering.h"

#include <limits>

namespace kiln::portable {

LogicalResult GpuKernelLowering::lowerReduce(Operation* op, Value input, int64_t dim, bool isMax) {
  TileType in = cast<TileType>(input.getType()), out = cast<TileType>(op->getResult(0).getType());
  Value buf = stage(tiles_.at(input), in, 0); // uniform inputs are materialised
  Elems res;
  for (int64_t k = 0; k < perThread(out.getShape()); ++k) {
    Slot s = slot(out.getShape(), k);
    Value init = constOf(b_.getF32Type(), isMax ? -std::numeric_limits<double>::infinity() : 0.0);
    auto loop = b_.create<scf::ForOp>(loc_, cidx(0), cidx(in.getShape()[dim]), cidx(1), ValueRange{init});
    {
      OpBuilder::InsertionGuard guard(b_);
      b_.setInsertionPointToStart(loop.getBody());
      SmallVector<Value> c(s.coords);
      c.insert(c.begin() + dim, loop.getInductionVar());
      Value x = toF32(b_.create<memref::LoadOp>(loc_, buf, linearize(c, in.getShape())));
      Value a = loop.getRegionIterArgs()[0];
      Value v = isMax ? b_.create<arith::MaximumFOp>(loc_, a, x).getResult()
                      : b_.create<arith::AddFOp>(loc_, a, x).getResult();
      b_.create<scf::YieldOp>(loc_, v);
    }
    res.push_back(fromF32(loop.getResult(0), out.getElementType()));
  }
  tiles_[op->getResult(0)] = Dist{res, {}, false};
  return success();
}

} // namespace kiln::portable
