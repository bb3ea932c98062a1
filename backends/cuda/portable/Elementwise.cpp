// The portable CUDA lowering: elementwise ops (one scalar emitter for every backend),
// broadcasts and explicit layout conversions. (portable/Lowering.h)
#include "portable/Lowering.h"

namespace kiln::portable {

Value GpuKernelLowering::elementwise(Operation* op, ArrayRef<Value> x) { return kiln::emitScalar(b_, loc_, op, x); }

LogicalResult GpuKernelLowering::lowerConvertLayout(ConvertLayoutOp c) {
  // A uniform tile is in every layout already; others move through shared memory.
  const Dist& src = tiles_.at(c.getInput());
  if (src.uniform) {
    tiles_[c.getResult()] = src;
    return success();
  }
  Layout l = layoutOf(c.getType());
  tiles_[c.getResult()] = Dist{as(src, c.getType(), l), l, false};
  return success();
}

LogicalResult GpuKernelLowering::lowerBroadcast(BroadcastOp bc) {
  TileType in = bc.getInput().getType(), out = bc.getType();
  const Dist& src = tiles_.at(bc.getInput());
  if (src.uniform) {
    tiles_[bc.getResult()] = src;
    return success();
  }
  // Rows broadcast over an mma tile of the same warps and row fragments: each thread holds
  // its rows already.
  Layout want = layoutOf(out);
  if (src.layout.kind == Layout::MmaRows && want.kind == Layout::Mma && bc.getDims().size() == 1 &&
      bc.getDims()[0] == 0 && src.layout == Layout{Layout::MmaRows, want.wm, want.wn, want.tm, want.tn}) {
    Elems res;
    for (int64_t k = 0; k < perThread(out.getShape(), want); ++k) res.push_back(src.v[size_t(rowOfMma(k, want))]);
    tiles_[bc.getResult()] = Dist{res, want, false};
    return success();
  }
  Value buf = stage(src, in, 0);
  Elems res;
  for (int64_t k = 0; k < perThread(out.getShape()); ++k) {
    Slot s = slot(out.getShape(), k);
    SmallVector<Value> src;
    for (int64_t d : bc.getDims()) src.push_back(s.coords[d]);
    res.push_back(b_.create<memref::LoadOp>(loc_, buf, linearize(src, in.getShape())));
  }
  tiles_[bc.getResult()] = Dist{res, {}, false};
  return success();
}

LogicalResult GpuKernelLowering::lowerIota(IotaOp io) {
  // Each thread's own coordinates, in the layout the layout pass gave the tile (an mask on an
  // mma accumulator is made in the accumulator's layout: no trip through shared memory).
  TileType t = io.getType();
  Layout l = layoutOf(t);
  Elems res;
  for (int64_t k = 0; k < perThread(t.getShape(), l); ++k) {
    Value c = slot(t.getShape(), k, l).coords[size_t(io.getDim())];
    Value x = b_.create<arith::SIToFPOp>(loc_, b_.getF32Type(), b_.create<arith::IndexCastOp>(loc_, b_.getI32Type(), c));
    res.push_back(fromF32(x, t.getElementType()));
  }
  tiles_[io.getResult()] = Dist{res, l, false};
  return success();
}

LogicalResult GpuKernelLowering::lowerTranspose(TransposeOp tr) {
  TileType in = tr.getInput().getType(), out = tr.getType();
  if (foldsTranspose(tr)) { // its dot reads the input as it is (dotMma)
    transposedOf_[tr.getResult()] = tr.getInput();
    return success();
  }
  const Dist& src = tiles_.at(tr.getInput());
  if (src.uniform) {
    tiles_[tr.getResult()] = src;
    return success();
  }
  // Through shared memory: written row-major as the input, read back column by column into
  // the result's blocked layout.
  Value buf = stage(src, in, 0);
  Elems res;
  for (int64_t k = 0; k < perThread(out.getShape()); ++k) {
    Slot s = slot(out.getShape(), k);
    res.push_back(b_.create<memref::LoadOp>(loc_, buf, linearize({s.coords[1], s.coords[0]}, in.getShape())));
  }
  tiles_[tr.getResult()] = Dist{res, {}, false};
  return success();
}

LogicalResult GpuKernelLowering::lowerElementwise(Operation* e) {
  auto t = cast<TileType>(e->getResult(0).getType());
  SmallVector<const Dist*> ins;
  for (Value v : e->getOperands()) ins.push_back(&tiles_.at(v));
  bool uniform = llvm::all_of(ins, [](const Dist* d) { return d->uniform; });
  Layout layout; // tensor-core results stay in their layout; others meet them there
  for (const Dist* d : ins)
    if (!d->uniform && (d->layout.isMma() || !layout.isMma())) layout = d->layout;
  SmallVector<Elems> xs;
  for (size_t i = 0; i < ins.size(); ++i)
    xs.push_back(uniform ? ins[i]->v : as(*ins[i], cast<TileType>(e->getOperand(i).getType()), layout));
  Elems res;
  for (size_t k = 0; k < xs[0].size(); ++k) {
    SmallVector<Value> x;
    for (const Elems& in : xs) x.push_back(toF32(in[k]));
    res.push_back(fromF32(elementwise(e, x), t.getElementType()));
  }
  tiles_[e->getResult(0)] = Dist{res, layout, uniform};
  return success();
}

} // namespace kiln::portable
