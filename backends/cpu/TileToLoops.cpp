// kiln-lower-to-loops: the CPU backend's lowering of tile kernels to plain loops.
//
// Tile values become statically shaped buffers allocated once at function entry (so a
// loop body never grows the stack, and a 128x128 f32 tile is not a 64 KiB alloca on a
// small thread stack). SSA dominance means each buffer is written only by its own op;
// the one way a value can outlive an iteration is a loop's carried value, which gets a
// dedicated buffer that the yield copies into. That keeps value semantics exact.
#include "Transforms/Passes.h"
#include "Transforms/ScalarMath.h"
#include "Transforms/ViewBase.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

namespace kiln {
#define GEN_PASS_DEF_KILNLOWERTOLOOPS
#include "Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln::tile;

namespace {

/// Where a tile.view points: the argument's memref and the element offset per dim.
struct ViewInfo {
  Value base;
  SmallVector<Value> offsets;
  ArrayRef<int64_t> shape;
};

class KernelLowering {
public:
  KernelLowering(KernelOp kernel, OpBuilder& b) : kernel_(kernel), b_(b) {}

  LogicalResult run();

private:
  using BodyFn = function_ref<void(OpBuilder&, Location, ValueRange)>;

  Value buffer(TileType t);
  /// A loop nest over `ubs` (index values), calling body with the induction variables.
  scf::LoopNest nest(Location loc, ArrayRef<Value> ubs, BodyFn body);
  scf::LoopNest nestStatic(Location loc, ArrayRef<int64_t> shape, BodyFn body);
  Value cidx(Location loc, int64_t v) { return b_.create<arith::ConstantIndexOp>(loc, v); }
  Value toF32(OpBuilder& b, Location loc, Value v);
  Value fromF32(OpBuilder& b, Location loc, Value v, Type to);
  Value constF32(OpBuilder& b, Location loc, double v) {
    return b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(static_cast<float>(v)));
  }
  void fill(Location loc, Value buf, TileType t, function_ref<Value(OpBuilder&, Location)> v);
  void copy(Location loc, Value from, Value to, TileType t);
  /// In-bounds extent of a view along each dim: clamp(dim - offset, 0, tile).
  SmallVector<Value> extents(Location loc, const ViewInfo& v);

  LogicalResult lowerBlock(Block& block);
  LogicalResult lowerOp(Operation* op);
  LogicalResult lowerLoop(LoopOp op);
  LogicalResult lowerElementwise(Operation* op);

  KernelOp kernel_;
  OpBuilder& b_;
  func::FuncOp func_;
  IRMapping map_;
  DenseMap<Value, ViewInfo> views_;
  SmallVector<Value> allocs_;
};

Value KernelLowering::buffer(TileType t) {
  auto mt = MemRefType::get(t.getShape(), t.getElementType());
  // Created where we are, hoisted to the function entry in run(): allocs take no
  // operands, so moving them up is always legal.
  Value buf = b_.create<memref::AllocOp>(kernel_.getLoc(), mt, b_.getI64IntegerAttr(64));
  allocs_.push_back(buf);
  return buf;
}

scf::LoopNest KernelLowering::nest(Location loc, ArrayRef<Value> ubs, BodyFn body) {
  SmallVector<Value> lbs(ubs.size(), cidx(loc, 0)), steps(ubs.size(), cidx(loc, 1));
  return scf::buildLoopNest(b_, loc, lbs, ubs, steps, body);
}

scf::LoopNest KernelLowering::nestStatic(Location loc, ArrayRef<int64_t> shape, BodyFn body) {
  SmallVector<Value> ubs;
  for (int64_t d : shape) ubs.push_back(cidx(loc, d));
  return nest(loc, ubs, body);
}

Value KernelLowering::toF32(OpBuilder& b, Location loc, Value v) {
  if (v.getType().isF32()) return v;
  return b.create<arith::ExtFOp>(loc, b.getF32Type(), v);
}

Value KernelLowering::fromF32(OpBuilder& b, Location loc, Value v, Type to) {
  if (to.isF32()) return v;
  return b.create<arith::TruncFOp>(loc, to, v);
}

void KernelLowering::fill(Location loc, Value buf, TileType t,
                          function_ref<Value(OpBuilder&, Location)> v) {
  nestStatic(loc, t.getShape(), [&](OpBuilder& b, Location l, ValueRange iv) {
    b.create<memref::StoreOp>(l, fromF32(b, l, v(b, l), t.getElementType()), buf, iv);
  });
}

void KernelLowering::copy(Location loc, Value from, Value to, TileType t) {
  nestStatic(loc, t.getShape(), [&](OpBuilder& b, Location l, ValueRange iv) {
    b.create<memref::StoreOp>(l, b.create<memref::LoadOp>(l, from, iv), to, iv);
  });
}

SmallVector<Value> KernelLowering::extents(Location loc, const ViewInfo& v) {
  SmallVector<Value> ext;
  for (auto [d, off] : llvm::enumerate(v.offsets)) {
    Value dim = b_.create<memref::DimOp>(loc, v.base, d);
    Value left = b_.create<arith::SubIOp>(loc, dim, off);
    left = b_.create<arith::MaxSIOp>(loc, left, cidx(loc, 0));
    ext.push_back(b_.create<arith::MinSIOp>(loc, left, cidx(loc, v.shape[d])));
  }
  return ext;
}

LogicalResult KernelLowering::run() {
  Location loc = kernel_.getLoc();
  SmallVector<Type> argTypes;
  for (unsigned i = 0; i < kernel_.getNumArguments(); ++i) {
    TensorArgType t = kernel_.getArgType(i);
    SmallVector<int64_t> dyn(t.getRank(), ShapedType::kDynamic);
    auto layout = StridedLayoutAttr::get(t.getContext(), ShapedType::kDynamic, dyn);
    argTypes.push_back(MemRefType::get(dyn, t.getElementType(), layout));
  }
  b_.setInsertionPoint(kernel_);
  func_ = b_.create<func::FuncOp>(loc, kernel_.getSymName(),
                                  b_.getFunctionType(argTypes, {}));
  Block* body = func_.addEntryBlock();
  for (unsigned i = 0; i < kernel_.getNumArguments(); ++i)
    map_.map(kernel_.getArgument(i), body->getArgument(i));
  b_.setInsertionPointToEnd(body);
  if (failed(lowerBlock(kernel_.getBody().front()))) return failure();
  for (Value a : llvm::reverse(allocs_)) a.getDefiningOp()->moveBefore(&body->front());
  for (Value a : allocs_) b_.create<memref::DeallocOp>(loc, a);
  b_.create<func::ReturnOp>(loc);
  kernel_.erase();
  return success();
}

LogicalResult KernelLowering::lowerBlock(Block& block) {
  for (Operation& op : block.without_terminator())
    if (failed(lowerOp(&op))) return failure();
  return success();
}

LogicalResult KernelLowering::lowerOp(Operation* op) {
  Location loc = op->getLoc();
  return llvm::TypeSwitch<Operation*, LogicalResult>(op)
      .Case<DimOp>([&](DimOp d) {
        auto [arg, dim] = *kernel_.findSymbol(d.getSymbol());
        map_.map(d.getResult(),
                 b_.create<memref::DimOp>(loc, map_.lookup(kernel_.getArgument(arg)), dim));
        return success();
      })
      .Case<GridOp>([&](GridOp g) {
        SmallVector<Value> ubs;
        for (Value s : g.getSizes()) ubs.push_back(map_.lookup(s));
        LogicalResult res = success();
        OpBuilder::InsertPoint saved = b_.saveInsertionPoint();
        nest(loc, ubs, [&](OpBuilder& nb, Location, ValueRange ivs) {
          for (auto [a, iv] : llvm::zip(g.getBody().front().getArguments(), ivs)) map_.map(a, iv);
          b_.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
          res = lowerBlock(g.getBody().front());
        });
        b_.restoreInsertionPoint(saved);
        return res;
      })
      .Case<LoopOp>([&](LoopOp l) { return lowerLoop(l); })
      .Case<ReadOp>([&](ReadOp r) {
        SmallVector<Value> at;
        for (Value i : r.getIndices()) at.push_back(map_.lookup(i));
        map_.map(r.getResult(), kiln::readIndex(b_, loc, map_.lookup(r.getTensor()), at));
        return success();
      })
      .Case<ViewOp>([&](ViewOp v) {
        // Leading element indices (a view of fewer dims than its tensor) pick the slice;
        // the rest are tile indices into it (ViewBase.h).
        // A window narrows one of those (ViewBase.h).
        const size_t lead = v.getIndices().size() - size_t(v.getType().getRank());
        ViewInfo info{kiln::viewBase(b_, loc, map_.lookup(v.getTensor()), v, [&](Value i) { return map_.lookup(i); }), {},
                      v.getType().getShape()};
        for (auto [d, idx] : llvm::enumerate(v.getIndices().drop_front(lead)))
          info.offsets.push_back(
              b_.create<arith::MulIOp>(loc, map_.lookup(idx), cidx(loc, info.shape[d])));
        views_[v.getResult()] = info;
        return success();
      })
      .Case<LoadOp>([&](LoadOp l) {
        TileType t = l.getType();
        const ViewInfo& v = views_.at(l.getView());
        Value buf = buffer(t);
        double pad = l.getPadding().convertToDouble();
        fill(loc, buf, t, [&](OpBuilder& b, Location fl) { return constF32(b, fl, pad); });
        nest(loc, extents(loc, v), [&](OpBuilder& b, Location il, ValueRange iv) {
          SmallVector<Value> g;
          for (auto [i, off] : llvm::enumerate(v.offsets))
            g.push_back(b.create<arith::AddIOp>(il, off, iv[i]));
          b.create<memref::StoreOp>(il, b.create<memref::LoadOp>(il, v.base, g), buf, iv);
        });
        map_.map(l.getResult(), buf);
        return success();
      })
      .Case<StoreOp>([&](StoreOp s) {
        const ViewInfo& v = views_.at(s.getView());
        Value src = map_.lookup(s.getValue());
        nest(loc, extents(loc, v), [&](OpBuilder& b, Location il, ValueRange iv) {
          SmallVector<Value> g;
          for (auto [i, off] : llvm::enumerate(v.offsets))
            g.push_back(b.create<arith::AddIOp>(il, off, iv[i]));
          b.create<memref::StoreOp>(il, b.create<memref::LoadOp>(il, src, iv), v.base, g);
        });
        return success();
      })
      .Case<FullOp>([&](FullOp f) {
        Value buf = buffer(f.getType());
        double v = f.getValue().convertToDouble();
        fill(loc, buf, f.getType(), [&](OpBuilder& b, Location fl) { return constF32(b, fl, v); });
        map_.map(f.getResult(), buf);
        return success();
      })
      .Case<SplatOp>([&](SplatOp s) {
        Value scalar = map_.lookup(s.getScalar());
        if (scalar.getType().isIndex()) {
          Value i64 = b_.create<arith::IndexCastOp>(loc, b_.getI64Type(), scalar);
          scalar = b_.create<arith::SIToFPOp>(loc, b_.getF32Type(), i64);
        }
        Value buf = buffer(s.getType());
        fill(loc, buf, s.getType(), [&](OpBuilder&, Location) { return scalar; });
        map_.map(s.getResult(), buf);
        return success();
      })
      .Case<DotOp>([&](DotOp d) {
        TileType ct = d.getType();
        Value a = map_.lookup(d.getLhs()), bm = map_.lookup(d.getRhs());
        Value out = buffer(ct);
        copy(loc, map_.lookup(d.getAcc()), out, ct);
        int64_t m = ct.getShape()[0], n = ct.getShape()[1];
        int64_t k = d.getLhs().getType().getShape()[1];
        // Per row i of C: the row lives in registers (a vector<n x f32> carried through the
        // k loop) and takes one FMA per k with a[i][k] broadcast and row k of B: no load or
        // store of C inside the k loop, where a scalar i-k-j nest has two per element.
        auto f32 = b_.getF32Type();
        auto rowF32 = VectorType::get({n}, f32);
        auto rowB = VectorType::get({n}, d.getRhs().getType().getElementType());
        Value c0 = cidx(loc, 0), c1 = cidx(loc, 1);
        auto rows = b_.create<scf::ForOp>(loc, c0, cidx(loc, m), c1);
        {
          OpBuilder::InsertionGuard g(b_);
          b_.setInsertionPointToStart(rows.getBody());
          Value i = rows.getInductionVar();
          Value acc0 = b_.create<vector::LoadOp>(loc, rowF32, out, ValueRange{i, c0});
          auto ks = b_.create<scf::ForOp>(loc, c0, cidx(loc, k), c1, ValueRange{acc0},
                                          [&](OpBuilder& b, Location l, Value kk, ValueRange carried) {
            Value av = toF32(b, l, b.create<memref::LoadOp>(l, a, ValueRange{i, kk}));
            Value bv = b.create<vector::LoadOp>(l, rowB, bm, ValueRange{kk, c0});
            if (!rowB.getElementType().isF32()) bv = b.create<arith::ExtFOp>(l, rowF32, bv);
            Value splat = b.create<vector::BroadcastOp>(l, rowF32, av);
            b.create<scf::YieldOp>(l, ValueRange{b.create<vector::FMAOp>(l, splat, bv, carried[0])});
          });
          b_.create<vector::StoreOp>(loc, ks.getResult(0), out, ValueRange{i, c0});
        }
        map_.map(d.getResult(), out);
        return success();
      })
      .Case<IotaOp>([&](IotaOp io) {
        TileType t = io.getType();
        Value out = buffer(t);
        int64_t dim = io.getDim();
        nestStatic(loc, t.getShape(), [&](OpBuilder& b, Location l, ValueRange iv) {
          Value i64 = b.create<arith::IndexCastOp>(l, b.getI64Type(), iv[dim]);
          Value x = b.create<arith::SIToFPOp>(l, b.getF32Type(), i64);
          b.create<memref::StoreOp>(l, fromF32(b, l, x, t.getElementType()), out, iv);
        });
        map_.map(io.getResult(), out);
        return success();
      })
      .Case<TransposeOp>([&](TransposeOp tr) {
        Value in = map_.lookup(tr.getInput());
        Value out = buffer(tr.getType());
        nestStatic(loc, tr.getType().getShape(), [&](OpBuilder& b, Location l, ValueRange iv) {
          b.create<memref::StoreOp>(l, b.create<memref::LoadOp>(l, in, ValueRange{iv[1], iv[0]}), out, iv);
        });
        map_.map(tr.getResult(), out);
        return success();
      })
      .Case<BroadcastOp>([&](BroadcastOp bc) {
        Value in = map_.lookup(bc.getInput());
        Value out = buffer(bc.getType());
        ArrayRef<int64_t> dims = bc.getDims();
        nestStatic(loc, bc.getType().getShape(), [&](OpBuilder& b, Location l, ValueRange iv) {
          SmallVector<Value> src;
          for (int64_t d : dims) src.push_back(iv[d]);
          b.create<memref::StoreOp>(l, b.create<memref::LoadOp>(l, in, src), out, iv);
        });
        map_.map(bc.getResult(), out);
        return success();
      })
      .Case<ReduceSumOp, ReduceMaxOp>([&](auto r) {
        bool isMax = isa<ReduceMaxOp>(r.getOperation());
        TileType inT = r.getInput().getType(), outT = r.getType();
        Value in = map_.lookup(r.getInput());
        // Accumulate in f32 whatever the tile's dtype; round once at the end.
        TileType accT = outT.withElementType(b_.getF32Type());
        Value acc = buffer(accT);
        double init = isMax ? -std::numeric_limits<double>::infinity() : 0.0;
        fill(loc, acc, accT, [&](OpBuilder& b, Location l) { return constF32(b, l, init); });
        int64_t dim = r.getDim();
        nestStatic(loc, inT.getShape(), [&](OpBuilder& b, Location l, ValueRange iv) {
          SmallVector<Value> o(iv.begin(), iv.end());
          o.erase(o.begin() + dim);
          Value x = toF32(b, l, b.create<memref::LoadOp>(l, in, iv));
          Value a = b.create<memref::LoadOp>(l, acc, o);
          Value res = isMax ? b.create<arith::MaximumFOp>(l, a, x).getResult()
                            : b.create<arith::AddFOp>(l, a, x).getResult();
          b.create<memref::StoreOp>(l, res, acc, o);
        });
        Value out = acc;
        if (!outT.getElementType().isF32()) {
          out = buffer(outT);
          nestStatic(loc, outT.getShape(), [&](OpBuilder& b, Location l, ValueRange iv) {
            Value v = b.create<memref::LoadOp>(l, acc, iv);
            b.create<memref::StoreOp>(l, fromF32(b, l, v, outT.getElementType()), out, iv);
          });
        }
        map_.map(r.getResult(), out);
        return success();
      })
      .Case<NegOp, ExpOp, Exp2Op, LogOp, SqrtOp, RsqrtOp, TanhOp, AddOp, SubOp, MulOp, DivOp,
            MaxOp, MinOp, ScaleOp, CastOp, CmpOp, SelectOp>([&](Operation* e) { return lowerElementwise(e); }) // ScalarMath.h
      .Case<ReluOp, GeluOp, SiluOp, SigmoidOp>([&](Operation* c) {
        return c->emitOpError("is a composite: run kiln-expand-composites before "
                              "kiln-lower-to-loops");
      })
      .Default([&](Operation* other) -> LogicalResult {
        if (other->getDialect() &&
            other->getDialect()->getNamespace() == arith::ArithDialect::getDialectNamespace()) {
          Operation* c = b_.clone(*other, map_);
          (void)c;
          return success();
        }
        return other->emitOpError("cannot be lowered to CPU loops");
      });
}

LogicalResult KernelLowering::lowerElementwise(Operation* op) {
  Location loc = op->getLoc();
  auto outT = cast<TileType>(op->getResult(0).getType());
  SmallVector<Value> ins;
  for (Value v : op->getOperands()) ins.push_back(map_.lookup(v));
  Value out = buffer(outT);
  bool math = false;
  scf::LoopNest loops = nestStatic(loc, outT.getShape(), [&](OpBuilder& b, Location l, ValueRange iv) {
    SmallVector<Value> x;
    for (Value in : ins) x.push_back(toF32(b, l, b.create<memref::LoadOp>(l, in, iv)));
    Value r = kiln::emitScalar(b, l, op, x);
    b.create<memref::StoreOp>(l, fromF32(b, l, r, outT.getElementType()), out, iv);
    b.getInsertionBlock()->walk([&](Operation* e) { math |= isa<math::MathDialect>(e->getDialect()); });
  });
  // Fully unrolled, a tile's loops around math functions (tanh, exp, ...) grow the code
  // by the tile's size and LLVM's compile time past it (seconds for an 8x64 tile with a
  // few of them); the backend keeps LLVM from unrolling these (docs/cpu.md).
  if (math)
    for (scf::ForOp f : loops.loops) f->setAttr(kiln::kNoUnrollAttr, b_.getUnitAttr());
  map_.map(op->getResult(0), out);
  return success();
}

LogicalResult KernelLowering::lowerLoop(LoopOp l) {
  Location loc = l.getLoc();
  SmallVector<Value> carried;
  for (Value init : l.getInits()) {
    auto t = cast<TileType>(init.getType()); // the verifier admits only tile carries
    Value c = buffer(t);
    copy(loc, map_.lookup(init), c, t);
    carried.push_back(c);
  }
  auto yield = cast<YieldOp>(l.getBody().front().getTerminator());
  LogicalResult res = success();
  OpBuilder::InsertPoint saved = b_.saveInsertionPoint();
  nest(loc, {map_.lookup(l.getCount())}, [&](OpBuilder& nb, Location, ValueRange iv) {
    map_.map(l.getInductionVar(), iv[0]);
    for (auto [a, c] : llvm::zip(l.getCarried(), carried)) map_.map(a, c);
    b_.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
    if (failed(res = lowerBlock(l.getBody().front()))) return;
    // A yielded value that is itself a carried buffer (a swap) is staged through a temp
    // so that copying one carried value cannot clobber another before it is read.
    SmallVector<Value> src;
    for (auto [i, v] : llvm::enumerate(yield.getValues())) {
      Value m = map_.lookup(v);
      auto t = cast<TileType>(v.getType());
      if (m != carried[i] && llvm::is_contained(carried, m)) {
        Value tmp = buffer(t);
        copy(loc, m, tmp, t);
        m = tmp;
      }
      src.push_back(m);
    }
    for (auto [i, v] : llvm::enumerate(yield.getValues()))
      if (src[i] != carried[i]) copy(loc, src[i], carried[i], cast<TileType>(v.getType()));
  });
  b_.restoreInsertionPoint(saved);
  for (auto [r, c] : llvm::zip(l.getResults(), carried)) map_.map(r, c);
  return res;
}

struct LowerToLoopsPass : kiln::impl::KilnLowerToLoopsBase<LowerToLoopsPass> {
  void runOnOperation() override {
    SmallVector<KernelOp> kernels(getOperation().getOps<KernelOp>());
    OpBuilder b(&getContext());
    for (KernelOp k : kernels) {
      for (Type t : k.getBody().front().getArgumentTypes())
        if (!isa<TensorArgType>(t)) return signalPassFailure();
      if (failed(KernelLowering(k, b).run())) return signalPassFailure();
    }
  }
};

} // namespace
