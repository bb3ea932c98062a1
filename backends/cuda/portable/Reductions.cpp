// The portable CUDA lowering: reductions along a dim (sum, max). (portable/Lowering.h)
#include "portable/Lowering.h"

#include "llvm/Support/MathExtras.h"

#include <limits>

namespace kiln::portable {

namespace {
Value combine(OpBuilder& b, Location loc, bool isMax, Value a, Value x) {
  return isMax ? b.create<arith::MaximumFOp>(loc, a, x).getResult() : b.create<arith::AddFOp>(loc, a, x).getResult();
}
} // namespace

// Along the rows of a rank-2 tile, without moving the tile: each thread folds its elements of
// a row in registers, the lanes holding parts of that row fold theirs by shuffles, and one
// partial per warp and row goes through shared memory, folded in warp order (the same bits
// every run). One barrier pair, against C / 32 serial shared-memory loads per row of the
// fallback.
//  - mma layout (the scores of a tensor-core dot): lane l holds rows l / 4 and l / 4 + 8 of
//    each 16 x 8 fragment, two columns each: a row lies on the 4 lanes of a quad in each of
//    the wn warps along N;
//  - blocked, when the row length C and thread count T are powers of two and the tile fills
//    whole steps of T: thread t holds elements t + kT, so a row lies on L = min(C, 32)
//    neighbouring lanes of each of P = max(1, min(C, T) / 32) warps.
// An mma tile's rows wanted in its rows layout (MmaRows: kiln-assign-layouts' choice for a row
// reduction of an accumulator) come out of the shuffles in place: with one warp along N
// (wn = 1) nothing goes through shared memory and no barrier is needed.
std::optional<Dist> GpuKernelLowering::reduceRows(const Dist& src, TileType in, TileType out, bool isMax) {
  const int64_t R = in.getShape()[0], C = in.getShape()[1], T = T_;
  struct Group {
    Value v, row;
  };
  SmallVector<Group> groups;
  int64_t lanes = 0, P = 0; // lanes of a warp sharing a row (a power of two); warps sharing it
  Value part;               // this warp's index among the P
  if (src.layout.kind == Layout::Mma) {
    const Layout& l = src.layout;
    lanes = 4, P = l.wn;
    part = b_.create<arith::RemUIOp>(loc_, warp(), cidx(l.wn));
    for (int64_t tmi = 0; tmi < l.tm; ++tmi)
      for (int64_t h = 0; h < 2; ++h) {
        Value v;
        for (int64_t tni = 0; tni < l.tn; ++tni)
          for (int64_t e = 0; e < 2; ++e) {
            Value x = toF32(src.v[size_t((tmi * l.tn + tni) * 4 + 2 * h + e)]);
            v = v ? combine(b_, loc_, isMax, v, x) : x;
          }
        groups.push_back({v, mmaSlot((tmi * l.tn) * 4 + 2 * h, l).coords[0]});
      }
  } else {
    if (!llvm::isPowerOf2_64(uint64_t(C)) || !llvm::isPowerOf2_64(uint64_t(T)) || (R * C) % T != 0) return std::nullopt;
    Elems x = as(src, in, Layout{});
    lanes = std::min<int64_t>(C, 32), P = std::max<int64_t>(1, std::min(C, T) / 32);
    part = b_.create<arith::RemUIOp>(loc_, warp(), cidx(P));
    // A thread's slots in one row: C / T consecutive ones when C >= T, else one.
    const int64_t perGroup = std::max<int64_t>(1, C / T);
    for (int64_t g = 0; g * perGroup < int64_t(x.size()); ++g) {
      Value v = toF32(x[size_t(g * perGroup)]);
      for (int64_t k = 1; k < perGroup; ++k) v = combine(b_, loc_, isMax, v, toF32(x[size_t(g * perGroup + k)]));
      groups.push_back({v, slot(in.getShape(), g * perGroup).coords[0]});
    }
  }
  const Layout want = layoutOf(out);
  const bool inRows = src.layout.kind == Layout::Mma && want == Layout{Layout::MmaRows, src.layout.wm, src.layout.wn,
                                                                         src.layout.tm, src.layout.tn};
  Type i32 = b_.getI32Type();
  auto shuffleFold = [&](Group& g) {
    for (int64_t off = lanes / 2; off >= 1; off /= 2) {
      auto sh = b_.create<gpu::ShuffleOp>(loc_, g.v, b_.create<arith::ConstantIntOp>(loc_, i32, off),
                                          b_.create<arith::ConstantIntOp>(loc_, i32, 32), gpu::ShuffleMode::XOR);
      g.v = combine(b_, loc_, isMax, g.v, sh.getShuffleResult());
    }
  };
  if (inRows && P == 1) { // groups are in MmaRows order: fragment tmi, then row h
    Elems res;
    for (Group& g : groups) {
      shuffleFold(g);
      res.push_back(fromF32(g.v, out.getElementType()));
    }
    return Dist{res, want, false};
  }
  Value buf = shared(R * P, b_.getF32Type(), 0);
  barrier(); // earlier readers of the scratch are done
  Value writer = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::eq, b_.create<arith::RemUIOp>(loc_, lane(), cidx(lanes)),
                                          cidx(0));
  for (Group& g : groups) {
    shuffleFold(g);
    auto ifOp = b_.create<scf::IfOp>(loc_, writer, /*withElse=*/false);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
    Value at = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, g.row, cidx(P)), part);
    b_.create<memref::StoreOp>(loc_, g.v, buf, at);
  }
  barrier(); // every partial written before anyone reads
  const Layout resLayout = inRows ? want : Layout{};
  Elems res;
  for (int64_t k = 0; k < perThread(out.getShape(), resLayout); ++k) {
    Value base = b_.create<arith::MulIOp>(loc_, slot(out.getShape(), k, resLayout).coords[0], cidx(P));
    Value v = b_.create<memref::LoadOp>(loc_, buf, base);
    for (int64_t p = 1; p < P; ++p)
      v = combine(b_, loc_, isMax, v, b_.create<memref::LoadOp>(loc_, buf, ValueRange{b_.create<arith::AddIOp>(loc_, base, cidx(p))}));
    res.push_back(fromF32(v, out.getElementType()));
  }
  return Dist{res, resLayout, false};
}

LogicalResult GpuKernelLowering::lowerReduce(Operation* op, Value input, int64_t dim, bool isMax) {
  TileType in = cast<TileType>(input.getType()), out = cast<TileType>(op->getResult(0).getType());
  const Dist& src = tiles_.at(input);
  if (in.getRank() == 2 && dim == 1 && !src.uniform)
    if (std::optional<Dist> res = reduceRows(src, in, out, isMax)) {
      tiles_[op->getResult(0)] = *res;
      return success();
    }
  // Any other shape: the tile through shared memory, each result element folded by one
  // thread along the reduced dim.
  Value buf = stage(src, in, 0); // uniform inputs are materialised
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
      b_.create<scf::YieldOp>(loc_, combine(b_, loc_, isMax, loop.getRegionIterArgs()[0], x));
    }
    res.push_back(fromF32(loop.getResult(0), out.getElementType()));
  }
  tiles_[op->getResult(0)] = Dist{res, {}, false};
  return success();
}

} // namespace kiln::portable
