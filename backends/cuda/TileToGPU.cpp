// kiln-lower-to-gpu: the CUDA backend's portable (sm_80+) lowering of tile kernels.
//
// A tile value is distributed over the CTA's T threads as plain SSA values (registers), in
// one of these layouts:
//  - blocked: thread t holds elements t, t+T, t+2T, ... of the row-major tile, so
//    consecutive threads touch consecutive addresses (loads and stores coalesce).
//    Elements past N on the last step are "phantoms": their coordinates are clamped into
//    the tile so every address stays valid, and they are never written anywhere;
//  - mma: the accumulator layout of the tensor cores' mma.sync.m16n8k16 — warps tile the
//    result wm x wn, each warp holds tm x tn fragments of 16x8, four f32 per thread each
//    (on a rank-1 tile: the rows of that layout, portable/Lowering.h).
// A dot of bf16/f16 tiles whose shape fits runs on the tensor cores and yields an mma tile;
// elementwise ops keep their operands' layout; loop-carried tiles take the layout their
// loop yields. Ops that need another thread's elements (dot operands, broadcast, reduce,
// a change of layout) stage them in one dynamic shared-memory scratch buffer between two
// barriers.
#include "Transforms/Passes.h"
#include "Transforms/ViewBase.h"
#include "portable/Lowering.h"

namespace kiln {
#define GEN_PASS_DEF_KILNLOWERTOGPU
#include "Transforms/Passes.h.inc"
} // namespace kiln

namespace kiln::portable {

Slot GpuKernelLowering::slot(ArrayRef<int64_t> shape, int64_t k, const Layout& l) {
  if (l.kind == Layout::Mma) return mmaSlot(k, l);
  if (l.kind == Layout::MmaRows) return mmaRowSlot(k, l);
  int64_t n = numel(shape);
  Slot s;
  s.flat = b_.create<arith::AddIOp>(loc_, tid_, cidx(k * T_));
  Value e = s.flat;
  if ((k + 1) * T_ > n) { // the last step may run past the tile: clamp, and mark
    s.valid = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::ult, s.flat, cidx(n));
    e = b_.create<arith::MinUIOp>(loc_, s.flat, cidx(n - 1));
    s.flat = e;
  }
  s.coords.resize(shape.size());
  for (int64_t d = shape.size() - 1; d >= 0; --d) {
    s.coords[d] = d == 0 ? e : b_.create<arith::RemUIOp>(loc_, e, cidx(shape[d])).getResult();
    if (d > 0) e = b_.create<arith::DivUIOp>(loc_, e, cidx(shape[d]));
  }
  return s;
}

// Element k of a thread in the mma layout: fragment (k/4 -> tm_i, tn_i), register k%4.
// In a 16x8 fragment, lane l holds rows l/4 and l/4+8, columns 2(l%4) and 2(l%4)+1.
Slot GpuKernelLowering::mmaSlot(int64_t k, const Layout& l) {
  int64_t ci = k % 4, frag = k / 4, tmi = frag / l.tn, tni = frag % l.tn;
  Value w = warp(), ln = lane();
  Value wmI = b_.create<arith::DivUIOp>(loc_, w, cidx(l.wn));
  Value wnI = b_.create<arith::RemUIOp>(loc_, w, cidx(l.wn));
  Value row = b_.create<arith::AddIOp>(
      loc_, b_.create<arith::MulIOp>(loc_, wmI, cidx(l.tm * 16)),
      b_.create<arith::AddIOp>(loc_, b_.create<arith::DivUIOp>(loc_, ln, cidx(4)),
                               cidx(tmi * 16 + (ci / 2) * 8)));
  Value col = b_.create<arith::AddIOp>(
      loc_, b_.create<arith::MulIOp>(loc_, wnI, cidx(l.tn * 8)),
      b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, b_.create<arith::RemUIOp>(loc_, ln, cidx(4)), cidx(2)),
                               cidx(tni * 8 + ci % 2)));
  Slot s;
  s.coords = {row, col};
  s.flat = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, row, cidx(l.wn * l.tn * 8)), col);
  return s;
}

Slot GpuKernelLowering::mmaRowSlot(int64_t k, const Layout& l) {
  Value wmI = b_.create<arith::DivUIOp>(loc_, warp(), cidx(l.wn));
  Value row = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, wmI, cidx(l.tm * 16)),
                                       b_.create<arith::AddIOp>(loc_, b_.create<arith::DivUIOp>(loc_, lane(), cidx(4)),
                                                                cidx((k / 2) * 16 + (k % 2) * 8)));
  Slot s;
  s.coords = {row};
  s.flat = row;
  return s;
}

ViewInfo GpuKernelLowering::viewOf(ViewOp v, llvm::function_ref<Value(Value)> index) {
  // Leading element indices (a view of fewer dims than its tensor) pick the slice; the rest
  // are tile indices into it; a window narrows one of those (ViewBase.h).
  const size_t lead = v.getIndices().size() - size_t(v.getType().getRank());
  ViewInfo info{kiln::viewBase(b_, loc_, map_.lookup(v.getTensor()), v, index), {},
                llvm::to_vector(v.getType().getShape())};
  for (auto [d, idx] : llvm::enumerate(v.getIndices().drop_front(lead)))
    info.offsets.push_back(b_.create<arith::MulIOp>(loc_, index(idx), cidx(info.shape[d])));
  return info;
}

Value GpuKernelLowering::linearize(ArrayRef<Value> coords, ArrayRef<int64_t> shape) {
  Value flat = coords[0];
  for (size_t d = 1; d < shape.size(); ++d)
    flat = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, flat, cidx(shape[d])),
                                    coords[d]);
  return flat;
}

LogicalResult GpuKernelLowering::run() {
  // Layouts assigned for another warp count would not fit this CTA's threads.
  const int64_t warps = T_ / 32;
  auto fits = [&](Operation* op, Attribute a) -> LogicalResult {
    auto m = dyn_cast_or_null<MmaLayoutAttr>(a);
    if (!m || m.getWarpsM() * m.getWarpsN() == warps) return success();
    return op->emitOpError("has a layout for ") << m.getWarpsM() * m.getWarpsN() << " warps, but the kernel is lowered with "
                                                << warps << " (run kiln-assign-layouts with the same num-warps)";
  };
  // The layouts are kiln-assign-layouts' alone: when it did not run (kiln-opt on bare tile
  // IR), run it here, so the lowering never decides a layout itself.
  bool assigned = false;
  kernel_.walk([&](Operation* op) {
    for (Type t : op->getResultTypes())
      if (auto tile = dyn_cast<TileType>(t); tile && tile.getEncoding()) assigned = true;
  });
  if (!assigned) assignLayouts(kernel_, warps);
  WalkResult checked = kernel_.walk([&](Operation* op) {
    for (Type t : op->getResultTypes())
      if (auto tile = dyn_cast<TileType>(t); tile && failed(fits(op, tile.getEncoding()))) return WalkResult::interrupt();
    return WalkResult::advance();
  });
  if (checked.wasInterrupted()) return failure();
  MLIRContext* ctx = kernel_.getContext();
  auto global = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Global);
  SmallVector<Type> argTypes;
  for (unsigned i = 0; i < kernel_.getNumArguments(); ++i) {
    TensorArgType t = kernel_.getArgType(i);
    SmallVector<int64_t> dyn(t.getRank(), ShapedType::kDynamic);
    auto layout = StridedLayoutAttr::get(ctx, ShapedType::kDynamic, dyn);
    argTypes.push_back(MemRefType::get(dyn, t.getElementType(), layout, global));
  }
  b_.setInsertionPointToEnd(module_.getBody());
  func_ = b_.create<gpu::GPUFuncOp>(loc_, kernel_.getSymName(), b_.getFunctionType(argTypes, {}));
  func_->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b_.getUnitAttr());
  func_.setKnownBlockSizeAttr(b_.getDenseI32ArrayAttr({int32_t(T_), 1, 1}));
  Block& entry = func_.getBody().front();
  for (unsigned i = 0; i < kernel_.getNumArguments(); ++i)
    map_.map(kernel_.getArgument(i), entry.getArgument(i));
  b_.setInsertionPointToStart(&entry);
  tid_ = b_.create<gpu::ThreadIdOp>(loc_, gpu::Dimension::x);
  auto ws = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  smemBase_ = b_.create<gpu::DynamicSharedMemoryOp>(
      loc_, MemRefType::get({ShapedType::kDynamic}, b_.getI8Type(), MemRefLayoutAttrInterface{}, ws));
  if (failed(lowerBlock(kernel_.getBody().front()))) return failure();
  b_.create<gpu::ReturnOp>(loc_);
  func_->setAttr("kiln.shared_bytes", b_.getI64IntegerAttr(smemBytes_));
  func_->setAttr("kiln.threads", b_.getI64IntegerAttr(T_));
  kernel_.erase();
  return success();
}

LogicalResult GpuKernelLowering::lowerBlock(Block& block) {
  for (Operation& op : block.without_terminator())
    if (failed(lowerOp(&op))) return failure();
  return success();
}

LogicalResult GpuKernelLowering::lowerOp(Operation* op) {
  loc_ = op->getLoc();
  return llvm::TypeSwitch<Operation*, LogicalResult>(op)
      .Case<DimOp>([&](DimOp d) {
        auto [arg, dim] = *kernel_.findSymbol(d.getSymbol());
        map_.map(d.getResult(), b_.create<memref::DimOp>(loc_, map_.lookup(kernel_.getArgument(arg)), dim));
        return success();
      })
      .Case<GridOp>([&](GridOp g) {
        static const gpu::Dimension dims[] = {gpu::Dimension::x, gpu::Dimension::y, gpu::Dimension::z};
        for (auto [i, iv] : llvm::enumerate(g.getBody().front().getArguments()))
          map_.map(iv, b_.create<gpu::BlockIdOp>(loc_, dims[i]));
        return lowerBlock(g.getBody().front());
      })
      .Case<LoopOp>([&](LoopOp l) { return lowerLoop(l); })
      .Case<ReadOp>([&](ReadOp r) {
        SmallVector<Value> at;
        for (Value i : r.getIndices()) at.push_back(map_.lookup(i));
        map_.map(r.getResult(), readIndex(b_, loc_, map_.lookup(r.getTensor()), at));
        return success();
      })
      .Case<ViewOp>([&](ViewOp v) {
        views_[v.getResult()] = viewOf(v, [&](Value idx) { return map_.lookup(idx); });
        return success();
      })
      .Case<LoadOp>([&](LoadOp l) { return lowerLoad(l); })
      .Case<StoreOp>([&](StoreOp st) { return lowerStore(st); })
      .Case<FullOp>([&](FullOp f) {
        Value c = constOf(f.getType().getElementType(), f.getValue().convertToDouble());
        tiles_[f.getResult()] = Dist{{c}, {}, true};
        return success();
      })
      .Case<SplatOp>([&](SplatOp s) {
        Value x = map_.lookup(s.getScalar());
        if (x.getType().isIndex())
          x = b_.create<arith::SIToFPOp>(loc_, b_.getF32Type(),
                                         b_.create<arith::IndexCastOp>(loc_, b_.getI64Type(), x));
        x = fromF32(x, s.getType().getElementType());
        tiles_[s.getResult()] = Dist{{x}, {}, true};
        return success();
      })
      .Case<DotOp>([&](DotOp d) {
        if (auto l = mmaLayoutFor(d)) tiles_[d.getResult()] = dotMma(d, *l);
        else tiles_[d.getResult()] = dotSimt(d);
        return success();
      })
      .Case<ConvertLayoutOp>([&](ConvertLayoutOp c) { return lowerConvertLayout(c); })
      .Case<BroadcastOp>([&](BroadcastOp bc) { return lowerBroadcast(bc); })
      .Case<IotaOp>([&](IotaOp io) { return lowerIota(io); })
      .Case<TransposeOp>([&](TransposeOp tr) { return lowerTranspose(tr); })
      .Case<ReduceSumOp>([&](ReduceSumOp r) { return lowerReduce(r.getOperation(), r.getInput(), r.getDim(), false); })
      .Case<ReduceMaxOp>([&](ReduceMaxOp r) { return lowerReduce(r.getOperation(), r.getInput(), r.getDim(), true); })
      .Case<NegOp, ExpOp, Exp2Op, LogOp, SqrtOp, RsqrtOp, TanhOp, AddOp, SubOp, MulOp, DivOp,
            MaxOp, MinOp, ScaleOp, CastOp, CmpOp, SelectOp>([&](Operation* e) { return lowerElementwise(e); })
      .Case<ReluOp, GeluOp, SiluOp, SigmoidOp>([&](Operation* c) {
        return c->emitOpError("is a composite: run kiln-expand-composites before kiln-lower-to-gpu");
      })
      .Default([&](Operation* other) -> LogicalResult {
        if (other->getDialect() &&
            other->getDialect()->getNamespace() == arith::ArithDialect::getDialectNamespace()) {
          b_.clone(*other, map_);
          return success();
        }
        return other->emitOpError("cannot be lowered to the GPU");
      });
}


} // namespace kiln::portable

namespace {
using namespace mlir;
using kiln::portable::GpuKernelLowering;
using kiln::tile::KernelOp;

struct LowerToGPUPass : kiln::impl::KilnLowerToGPUBase<LowerToGPUPass> {
  using KilnLowerToGPUBase::KilnLowerToGPUBase;
  void runOnOperation() override {
    ModuleOp m = getOperation();
    if (numWarps < 1 || numWarps > 32) {
      m.emitError("num-warps must be 1..32, got ") << numWarps;
      return signalPassFailure();
    }
    SmallVector<KernelOp> kernels(m.getOps<KernelOp>());
    if (kernels.empty()) return;
    OpBuilder b(&getContext());
    m->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), b.getUnitAttr());
    b.setInsertionPointToEnd(m.getBody());
    // kiln-lower-gemm-sm90 may have made the module already (for a kernel's sm_90a twin).
    auto gm = m.lookupSymbol<gpu::GPUModuleOp>("kiln");
    if (!gm) gm = b.create<gpu::GPUModuleOp>(m.getLoc(), "kiln");
    for (KernelOp k : kernels)
      if (failed(GpuKernelLowering(k, gm, numWarps * 32).run())) return signalPassFailure();
  }
};

} // namespace
