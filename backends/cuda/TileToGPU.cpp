// kiln-lower-to-gpu: the CUDA backend's portable (sm_80+) lowering of tile kernels.
//
// A tile value is distributed over the CTA's T threads as plain SSA values (registers), in
// one of two layouts:
//  - blocked: thread t holds elements t, t+T, t+2T, ... of the row-major tile, so
//    consecutive threads touch consecutive addresses (loads and stores coalesce).
//    Elements past N on the last step are "phantoms": their coordinates are clamped into
//    the tile so every address stays valid, and they are never written anywhere;
//  - mma: the accumulator layout of the tensor cores' mma.sync.m16n8k16 — warps tile the
//    result wm x wn, each warp holds tm x tn fragments of 16x8, four f32 per thread each.
// A dot of bf16/f16 tiles whose shape fits runs on the tensor cores and yields an mma tile;
// elementwise ops keep their operands' layout; loop-carried tiles take the layout their
// loop yields. Ops that need another thread's elements (dot operands, broadcast, reduce,
// a change of layout) stage them in one dynamic shared-memory scratch buffer between two
// barriers.
#include "Transforms/Passes.h"
#include "Transforms/ScalarMath.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

#include <numbers>

namespace kiln {
#define GEN_PASS_DEF_KILNLOWERTOGPU
#include "Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln::tile;

namespace {

using Elems = SmallVector<Value>;

/// How a tile's elements are spread over the CTA's threads.
struct Layout {
  enum Kind { Blocked, Mma } kind = Blocked;
  int64_t wm = 1, wn = 1; ///< Mma: warps along M and N
  int64_t tm = 1, tn = 1; ///< Mma: 16x8 fragments per warp along M and N
  bool operator==(const Layout& o) const {
    return kind == o.kind && (kind == Blocked || (wm == o.wm && wn == o.wn && tm == o.tm && tn == o.tn));
  }
  bool operator!=(const Layout& o) const { return !(*this == o); }
};

/// A distributed tile: per-thread values in a layout. A uniform tile (a constant or a
/// splat) holds one value that stands for every element, in any layout.
struct Dist {
  Elems v;
  Layout layout;
  bool uniform = false;
};

struct ViewInfo {
  Value base;
  SmallVector<Value> offsets;
  SmallVector<int64_t> shape;
};

/// One element a thread holds: its flat index in the tile, its coordinates (clamped for
/// phantoms) and whether it exists (null when it always does).
struct Slot {
  SmallVector<Value> coords;
  Value flat;
  Value valid;
};

int64_t numel(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

class GpuKernelLowering {
public:
  GpuKernelLowering(KernelOp k, gpu::GPUModuleOp m, int64_t threads)
      : kernel_(k), module_(m), T_(threads), b_(k.getContext()) {}
  LogicalResult run();

private:
  Location loc() const { return loc_; }
  Value cidx(int64_t v) { return b_.create<arith::ConstantIndexOp>(loc_, v); }
  int64_t perThread(ArrayRef<int64_t> shape, const Layout& l = {}) const {
    return l.kind == Layout::Mma ? l.tm * l.tn * 4 : (numel(shape) + T_ - 1) / T_;
  }
  Slot slot(ArrayRef<int64_t> shape, int64_t k, const Layout& l = {});
  Slot mmaSlot(int64_t k, const Layout& l);
  /// The tensor-core layout for a dot producing `c`, if its shapes and dtypes fit.
  std::optional<Layout> mmaLayoutFor(DotOp d);
  /// The layout a value will have once lowered (for loop-carried tiles).
  Layout predictLayout(Value v, int depth = 0);
  /// `d` in layout `l` (materialising uniform tiles, converting through shared memory).
  Elems as(const Dist& d, TileType t, const Layout& l);
  Value lane() { return b_.create<arith::RemUIOp>(loc_, tid_, cidx(32)); }
  Value warp() { return b_.create<arith::DivUIOp>(loc_, tid_, cidx(32)); }
  Dist dotMma(DotOp d, const Layout& l);
  Dist dotSimt(DotOp d);
  Value linearize(ArrayRef<Value> coords, ArrayRef<int64_t> shape);
  Value toF32(Value v) {
    return v.getType().isF32() ? v : b_.create<arith::ExtFOp>(loc_, b_.getF32Type(), v);
  }
  Value fromF32(Value v, Type to) {
    return to.isF32() ? v : b_.create<arith::TruncFOp>(loc_, to, v);
  }
  Value constOf(Type t, double v) {
    return b_.create<arith::ConstantOp>(loc_, b_.getFloatAttr(t, v));
  }
  Value andOf(Value a, Value b) {
    if (!a) return b;
    if (!b) return a;
    return b_.create<arith::AndIOp>(loc_, a, b);
  }
  /// A flat shared-memory array of `n` elements of `elt` at `byteOffset` of the scratch.
  Value shared(int64_t n, Type elt, int64_t byteOffset);
  void barrier() { b_.create<gpu::BarrierOp>(loc_); }
  /// Writes a distributed tile into shared memory (row-major), fenced by barriers.
  Value stage(const Dist& d, TileType t, int64_t byteOffset);
  /// The unfenced part of stage(): this thread's elements into `buf`.
  void write(const Dist& d, TileType t, Value buf);
  /// Stages a dot's operands: tiles loaded only for this dot go global -> shared directly
  /// (cp.async, 16 bytes at a time), the rest from registers; one barrier pair for all.
  SmallVector<Value> stageOperands(ArrayRef<Value> tiles, ArrayRef<int64_t> byteOffsets);
  /// Copies the window `v` of a tile of type `t` from global memory into `buf`.
  void copyGlobalToShared(const ViewInfo& v, TileType t, Value buf);
  /// i1: the rows of `base` are 16-byte aligned (unit inner stride, row stride and base
  /// multiples of 16 bytes), so tiles of `t` can be copied 16 bytes at a time.
  Value rowsAligned(Value base, TileType t);
  /// `base` (rank 2) typed with a static unit inner stride; the caller has checked it is 1.
  Value unitInnerStride(Value base);
  /// Stores an mma-layout tile, two adjacent columns per vector store where the row
  /// stride and base allow it, element by element elsewhere.
  void storeMmaPairs(const ViewInfo& v, TileType t, const Layout& layout, const Elems& src);
  /// Issues this thread's 16-byte cp.async copies of window `v` into `buf` (no commit).
  void asyncCopy(const ViewInfo& v, TileType t, Value buf);
  /// The k-loop of a tensor-core dot over operands already in shared memory.
  Elems mmaLoop(Value bufA, Value bufB, TileType at, TileType ct, const Layout& l, ValueRange acc);
  /// The global coordinates of slot `s` of view `v`, and whether they lie inside the
  /// tensor (dims `dims`) and the slot exists.
  std::pair<SmallVector<Value>, Value> globalSlot(const ViewInfo& v, const Slot& s, ArrayRef<Value> dims);
  /// The element at slot `s` of view `v`, or `pad` outside the tensor.
  Value maskedLoad(const ViewInfo& v, const Slot& s, ArrayRef<Value> dims, Type elt, double pad);
  SmallVector<Value> dimsOf(Value base, size_t rank);
  /// A shared-memory array at a run-time byte offset (the caller bounds it by `maxEnd`).
  Value sharedAt(int64_t n, Type elt, Value byteOffset, int64_t maxEnd);
  struct PipePlan {
    DotOp dot;
    LoadOp a, b;
    Layout layout;
  };
  /// A loop that only loads two tiles and feeds them to one tensor-core dot accumulating
  /// its single carried value can be software-pipelined `stages` deep.
  std::optional<PipePlan> pipelinePlan(LoopOp l);
  Elems lowerLoopPipelined(LoopOp l, PipePlan plan, const Elems& init);
  FailureOr<Elems> lowerLoopSimple(LoopOp l, ArrayRef<Layout> layouts, ArrayRef<Value> inits);
  /// `v` (an index computed in the loop body) recomputed with the induction variable
  /// replaced by `iv`.
  Value remat(Value v, LoopOp l, Value iv);

  LogicalResult lowerBlock(Block& block);
  LogicalResult lowerOp(Operation* op);
  LogicalResult lowerLoop(LoopOp op);
  Value elementwise(Operation* op, ArrayRef<Value> x);

  KernelOp kernel_;
  gpu::GPUModuleOp module_;
  int64_t T_;
  OpBuilder b_;
  Location loc_ = kernel_.getLoc();
  gpu::GPUFuncOp func_;
  Value tid_, smemBase_;
  int64_t smemBytes_ = 0;
  IRMapping map_;
  DenseMap<Value, Dist> tiles_;
  DenseMap<Value, ViewInfo> views_;
  /// Loads whose only use is a dot operand: emitted by the dot as global -> shared copies.
  DenseMap<Value, ViewInfo> direct_;
};

Slot GpuKernelLowering::slot(ArrayRef<int64_t> shape, int64_t k, const Layout& l) {
  if (l.kind == Layout::Mma) return mmaSlot(k, l);
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

Value GpuKernelLowering::linearize(ArrayRef<Value> coords, ArrayRef<int64_t> shape) {
  Value flat = coords[0];
  for (size_t d = 1; d < shape.size(); ++d)
    flat = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, flat, cidx(shape[d])),
                                    coords[d]);
  return flat;
}

Value GpuKernelLowering::shared(int64_t n, Type elt, int64_t byteOffset) {
  int64_t bytes = n * (elt.getIntOrFloatBitWidth() / 8);
  smemBytes_ = std::max(smemBytes_, byteOffset + bytes);
  auto ws = gpu::AddressSpaceAttr::get(b_.getContext(), gpu::AddressSpace::Workgroup);
  auto type = MemRefType::get({n}, elt, MemRefLayoutAttrInterface{}, ws);
  return b_.create<memref::ViewOp>(loc_, type, smemBase_, cidx(byteOffset), ValueRange{});
}

Value GpuKernelLowering::sharedAt(int64_t n, Type elt, Value byteOffset, int64_t maxEnd) {
  smemBytes_ = std::max(smemBytes_, maxEnd);
  auto ws = gpu::AddressSpaceAttr::get(b_.getContext(), gpu::AddressSpace::Workgroup);
  auto type = MemRefType::get({n}, elt, MemRefLayoutAttrInterface{}, ws);
  return b_.create<memref::ViewOp>(loc_, type, smemBase_, byteOffset, ValueRange{});
}

Value GpuKernelLowering::stage(const Dist& d, TileType t, int64_t byteOffset) {
  Value buf = shared(t.getNumElements(), t.getElementType(), byteOffset);
  barrier(); // earlier readers of the scratch are done
  write(d, t, buf);
  barrier(); // every element written before anyone reads
  return buf;
}

void GpuKernelLowering::write(const Dist& d, TileType t, Value buf) {
  Elems v = d.uniform ? as(d, t, d.layout) : d.v;
  for (int64_t k = 0; k < (int64_t)v.size(); ++k) {
    Slot s = slot(t.getShape(), k, d.layout);
    if (!s.valid) {
      b_.create<memref::StoreOp>(loc_, v[k], buf, s.flat);
      continue;
    }
    auto ifOp = b_.create<scf::IfOp>(loc_, s.valid, /*withElse=*/false);
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
    b_.create<memref::StoreOp>(loc_, v[k], buf, s.flat);
  }
}

SmallVector<Value> GpuKernelLowering::stageOperands(ArrayRef<Value> tiles, ArrayRef<int64_t> offsets) {
  SmallVector<Value> bufs;
  barrier(); // earlier readers of the scratch are done
  bool async = false;
  for (auto [v, off] : llvm::zip(tiles, offsets)) {
    auto t = cast<TileType>(v.getType());
    Value buf = shared(t.getNumElements(), t.getElementType(), off);
    if (auto it = direct_.find(v); it != direct_.end()) {
      copyGlobalToShared(it->second, t, buf);
      async = true;
    } else {
      write(tiles_.at(v), t, buf);
    }
    bufs.push_back(buf);
  }
  if (async) b_.create<NVVM::CpAsyncWaitGroupOp>(loc_, 0); // this thread's copies landed
  barrier(); // everyone's writes landed
  return bufs;
}

// Fast path when the rows are 16-byte aligned (contiguous rows, row stride and base a
// multiple of 16 bytes): each thread issues 16-byte cp.async copies, which zero-fill the
// part of a vector past the tensor's edge. Otherwise: element by element, masked.
SmallVector<Value> GpuKernelLowering::dimsOf(Value base, size_t rank) {
  SmallVector<Value> dims;
  for (size_t d = 0; d < rank; ++d) dims.push_back(b_.create<memref::DimOp>(loc_, base, d));
  return dims;
}

std::pair<SmallVector<Value>, Value> GpuKernelLowering::globalSlot(const ViewInfo& v, const Slot& s,
                                                                   ArrayRef<Value> dims) {
  SmallVector<Value> g;
  Value inb = s.valid;
  for (size_t d = 0; d < dims.size(); ++d) {
    g.push_back(b_.create<arith::AddIOp>(loc_, v.offsets[d], s.coords[d]));
    inb = andOf(inb, b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::ult, g[d], dims[d]));
  }
  return {g, inb};
}

Value GpuKernelLowering::maskedLoad(const ViewInfo& v, const Slot& s, ArrayRef<Value> dims, Type elt, double pad) {
  auto [g, inb] = globalSlot(v, s, dims);
  auto ifOp = b_.create<scf::IfOp>(loc_, TypeRange{elt}, inb, /*withElse=*/true);
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
  b_.create<scf::YieldOp>(loc_, ValueRange{b_.create<memref::LoadOp>(loc_, v.base, g)});
  b_.setInsertionPointToStart(&ifOp.getElseRegion().front());
  b_.create<scf::YieldOp>(loc_, ValueRange{constOf(elt, pad)});
  return ifOp.getResult(0);
}

void GpuKernelLowering::copyGlobalToShared(const ViewInfo& v, TileType t, Value buf) {
  ArrayRef<int64_t> shape = t.getShape();
  int64_t bytes = t.getElementType().getIntOrFloatBitWidth() / 8;
  int64_t vec = 16 / bytes, cols = shape.back();
  auto scalarCopy = [&]() {
    SmallVector<Value> dims = dimsOf(v.base, shape.size());
    for (int64_t k = 0; k < perThread(shape); ++k) {
      Slot s = slot(shape, k);
      Value val = maskedLoad(v, s, dims, t.getElementType(), 0.0);
      if (!s.valid) {
        b_.create<memref::StoreOp>(loc_, val, buf, s.flat);
      } else {
        auto w = b_.create<scf::IfOp>(loc_, s.valid, false);
        OpBuilder::InsertionGuard guard(b_);
        b_.setInsertionPointToStart(&w.getThenRegion().front());
        b_.create<memref::StoreOp>(loc_, val, buf, s.flat);
      }
    }
  };
  if (shape.size() != 2 || cols % vec != 0) return scalarCopy();
  // The view's strides and base decide at run time which path this CTA takes.
  auto ifOp = b_.create<scf::IfOp>(loc_, rowsAligned(v.base, t), /*withElse=*/true);
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
  asyncCopy(v, t, buf);
  b_.create<NVVM::CpAsyncCommitGroupOp>(loc_);
  b_.setInsertionPointToStart(&ifOp.getElseRegion().front());
  scalarCopy();
}

Value GpuKernelLowering::rowsAligned(Value base, TileType t) {
  int64_t bytes = t.getElementType().getIntOrFloatBitWidth() / 8, vec = 16 / bytes;
  auto meta = b_.create<memref::ExtractStridedMetadataOp>(loc_, base);
  Value ptr = b_.create<memref::ExtractAlignedPointerAsIndexOp>(loc_, base);
  Value addr = b_.create<arith::AddIOp>(loc_, ptr, b_.create<arith::MulIOp>(loc_, meta.getOffset(), cidx(bytes)));
  Value c0 = cidx(0);
  auto eq = [&](Value a, Value bv) { return b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::eq, a, bv).getResult(); };
  Value ok = eq(b_.create<arith::RemUIOp>(loc_, addr, cidx(16)), c0);
  ok = andOf(ok, eq(meta.getStrides()[1], cidx(1)));
  return andOf(ok, eq(b_.create<arith::RemUIOp>(loc_, meta.getStrides()[0], cidx(vec)), c0));
}

Value GpuKernelLowering::unitInnerStride(Value base) {
  auto meta = b_.create<memref::ExtractStridedMetadataOp>(loc_, base);
  auto type = cast<MemRefType>(base.getType());
  auto unit = MemRefType::get(type.getShape(), type.getElementType(),
                              StridedLayoutAttr::get(b_.getContext(), ShapedType::kDynamic,
                                                     {ShapedType::kDynamic, 1}),
                              type.getMemorySpace());
  return b_.create<memref::ReinterpretCastOp>(
      loc_, unit, meta.getBaseBuffer(), OpFoldResult(meta.getOffset()),
      ArrayRef<OpFoldResult>{meta.getSizes()[0], meta.getSizes()[1]},
      ArrayRef<OpFoldResult>{meta.getStrides()[0], b_.getIndexAttr(1)});
}

void GpuKernelLowering::storeMmaPairs(const ViewInfo& v, TileType t, const Layout& layout, const Elems& src) {
  int64_t bytes = t.getElementType().getIntOrFloatBitWidth() / 8;
  // Pairs need: unit inner stride, an even row stride, a base aligned to two elements.
  auto meta = b_.create<memref::ExtractStridedMetadataOp>(loc_, v.base);
  Value ptr = b_.create<memref::ExtractAlignedPointerAsIndexOp>(loc_, v.base);
  Value addr = b_.create<arith::AddIOp>(loc_, ptr, b_.create<arith::MulIOp>(loc_, meta.getOffset(), cidx(bytes)));
  Value c0 = cidx(0);
  auto eq = [&](Value a, Value bv) { return b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::eq, a, bv).getResult(); };
  Value ok = eq(b_.create<arith::RemUIOp>(loc_, addr, cidx(2 * bytes)), c0);
  ok = andOf(ok, eq(meta.getStrides()[1], cidx(1)));
  ok = andOf(ok, eq(b_.create<arith::RemUIOp>(loc_, meta.getStrides()[0], cidx(2)), c0));
  SmallVector<Value> dims = dimsOf(v.base, 2);
  auto scalar = [&](int64_t k) {
    auto [g, inb] = globalSlot(v, slot(t.getShape(), k, layout), dims);
    auto w = b_.create<scf::IfOp>(loc_, inb, /*withElse=*/false);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(&w.getThenRegion().front());
    b_.create<memref::StoreOp>(loc_, src[k], v.base, g);
  };
  auto ifOp = b_.create<scf::IfOp>(loc_, ok, /*withElse=*/true);
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
  Value unit = unitInnerStride(v.base);
  auto vecType = VectorType::get({2}, t.getElementType());
  // Registers k and k+1 (k even) of an mma fragment are columns c and c+1 of one row.
  for (int64_t k = 0; k + 1 < (int64_t)src.size(); k += 2) {
    auto [g, inb] = globalSlot(v, slot(t.getShape(), k, layout), dims);
    Value next = b_.create<arith::AddIOp>(loc_, g[1], cidx(1));
    Value both = andOf(inb, b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::ult, next, dims[1]));
    auto pair = b_.create<scf::IfOp>(loc_, both, /*withElse=*/true);
    OpBuilder::InsertionGuard g2(b_);
    b_.setInsertionPointToStart(&pair.getThenRegion().front());
    Value vec = b_.create<vector::FromElementsOp>(loc_, vecType, ValueRange{src[k], src[k + 1]});
    b_.create<vector::StoreOp>(loc_, vec, unit, g);
    b_.setInsertionPointToStart(&pair.getElseRegion().front());
    scalar(k);
    scalar(k + 1);
  }
  b_.setInsertionPointToStart(&ifOp.getElseRegion().front());
  for (int64_t k = 0; k < (int64_t)src.size(); ++k) scalar(k);
}

void GpuKernelLowering::asyncCopy(const ViewInfo& v, TileType t, Value buf) {
  ArrayRef<int64_t> shape = t.getShape();
  int64_t bytes = t.getElementType().getIntOrFloatBitWidth() / 8;
  int64_t vec = 16 / bytes, cols = shape.back();
  Value c0 = cidx(0);
  Value src = unitInnerStride(v.base);
  Value dim0 = b_.create<memref::DimOp>(loc_, src, 0), dim1 = b_.create<memref::DimOp>(loc_, src, 1);
  Value lastRow = b_.create<arith::MaxSIOp>(loc_, b_.create<arith::SubIOp>(loc_, dim0, cidx(1)), c0);
  int64_t vecsPerRow = cols / vec, nvec = shape[0] * vecsPerRow;
  for (int64_t k = 0; k * T_ < nvec; ++k) {
    Value e = b_.create<arith::AddIOp>(loc_, tid_, cidx(k * T_));
    Value valid;
    if ((k + 1) * T_ > nvec) {
      valid = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::ult, e, cidx(nvec));
      e = b_.create<arith::MinUIOp>(loc_, e, cidx(nvec - 1));
    }
    Value r = b_.create<arith::DivUIOp>(loc_, e, cidx(vecsPerRow));
    Value c = b_.create<arith::MulIOp>(loc_, b_.create<arith::RemUIOp>(loc_, e, cidx(vecsPerRow)), cidx(vec));
    Value gr = b_.create<arith::AddIOp>(loc_, v.offsets[0], r);
    Value gc = b_.create<arith::AddIOp>(loc_, v.offsets[1], c);
    // Elements of this vector inside the tensor: 0 past the last row, else what is left
    // of the row (clamped to 0..vec). The rest is zero-filled by the copy.
    Value left = b_.create<arith::SubIOp>(loc_, dim1, gc);
    left = b_.create<arith::MinSIOp>(loc_, b_.create<arith::MaxSIOp>(loc_, left, c0), cidx(vec));
    Value rowIn = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::slt, gr, dim0);
    Value n = b_.create<arith::SelectOp>(loc_, rowIn, left, c0);
    Value srcRow = b_.create<arith::MinSIOp>(loc_, gr, lastRow);
    Value srcCol = b_.create<arith::SelectOp>(loc_, b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::sgt, n, c0), gc, c0);
    Value dst = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, r, cidx(cols)), c);
    auto copy = [&]() {
      b_.create<nvgpu::DeviceAsyncCopyOp>(loc_, nvgpu::DeviceAsyncTokenType::get(b_.getContext()), buf,
                                          ValueRange{dst}, src, ValueRange{srcRow, srcCol},
                                          b_.getIndexAttr(vec), n, UnitAttr());
    };
    if (!valid) {
      copy();
    } else {
      auto w = b_.create<scf::IfOp>(loc_, valid, false);
      OpBuilder::InsertionGuard g2(b_);
      b_.setInsertionPointToStart(&w.getThenRegion().front());
      copy();
    }
  }
}

Elems GpuKernelLowering::as(const Dist& d, TileType t, const Layout& l) {
  if (d.uniform) return Elems(perThread(t.getShape(), l), d.v[0]);
  if (d.layout == l) return d.v;
  Value buf = stage(d, t, 0);
  Elems out;
  for (int64_t k = 0; k < perThread(t.getShape(), l); ++k)
    out.push_back(b_.create<memref::LoadOp>(loc_, buf, slot(t.getShape(), k, l).flat));
  return out;
}

std::optional<Layout> GpuKernelLowering::mmaLayoutFor(DotOp d) {
  TileType a = d.getLhs().getType(), c = d.getType();
  Type e = a.getElementType();
  if (!(e.isBF16() || e.isF16())) return std::nullopt;
  int64_t M = c.getShape()[0], N = c.getShape()[1], K = a.getShape()[1], W = T_ / 32;
  if (M % 16 || N % 8 || K % 16) return std::nullopt;
  std::optional<Layout> best;
  for (int64_t wm = 1; wm <= W; ++wm) {
    if (W % wm) continue;
    int64_t wn = W / wm;
    if (M % (16 * wm) || N % (8 * wn)) continue;
    Layout l{Layout::Mma, wm, wn, M / (16 * wm), N / (8 * wn)};
    // Prefer square warp tiles: fewest fragment loads per mma.
    auto cost = [](const Layout& x) { return std::abs(x.tm * 16 - x.tn * 8); };
    if (!best || cost(l) < cost(*best)) best = l;
  }
  return best;
}

Layout GpuKernelLowering::predictLayout(Value v, int depth) {
  if (depth > 64) return {};
  Operation* def = v.getDefiningOp();
  if (auto d = dyn_cast_or_null<DotOp>(def)) {
    if (auto l = mmaLayoutFor(d)) return *l;
    return {};
  }
  if (def && def->hasTrait<OpTrait::Elementwise>())
    for (Value o : def->getOperands()) {
      Layout l = predictLayout(o, depth + 1);
      if (l.kind == Layout::Mma) return l;
    }
  return {};
}

LogicalResult GpuKernelLowering::run() {
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
      .Case<ViewOp>([&](ViewOp v) {
        ViewInfo info{map_.lookup(v.getTensor()), {}, llvm::to_vector(v.getType().getShape())};
        for (auto [d, idx] : llvm::enumerate(v.getIndices()))
          info.offsets.push_back(b_.create<arith::MulIOp>(loc_, map_.lookup(idx), cidx(info.shape[d])));
        views_[v.getResult()] = info;
        return success();
      })
      .Case<LoadOp>([&](LoadOp l) {
        const ViewInfo& v = views_.at(l.getView());
        if (l->hasOneUse() && l.getPadding().isZero()) {
          auto dot = dyn_cast<DotOp>(*l->user_begin());
          // Deferring the read to the dot is safe only if nothing in between writes.
          auto writesBefore = [&](Operation* end) {
            for (Operation* o = l->getNextNode(); o && o != end; o = o->getNextNode())
              if (isa<StoreOp>(o) || o->getNumRegions() > 0) return true;
            return false;
          };
          if (dot && dot.getAcc() != l.getResult() && dot->getBlock() == l->getBlock() &&
              !writesBefore(dot)) {
            direct_[l.getResult()] = v;
            return success();
          }
        }
        TileType t = l.getType();
        SmallVector<Value> dims = dimsOf(v.base, v.shape.size());
        Elems out;
        for (int64_t k = 0; k < perThread(t.getShape()); ++k)
          out.push_back(maskedLoad(v, slot(t.getShape(), k), dims, t.getElementType(),
                                   l.getPadding().convertToDouble()));
        tiles_[l.getResult()] = Dist{out, {}, false};
        return success();
      })
      .Case<StoreOp>([&](StoreOp st) {
        const ViewInfo& v = views_.at(st.getView());
        TileType t = st.getValue().getType();
        const Dist& d = tiles_.at(st.getValue());
        Layout layout = d.uniform ? Layout{} : d.layout;
        Elems src = as(d, t, layout);
        if (layout.kind == Layout::Mma) {
          storeMmaPairs(v, t, layout, src);
          return success();
        }
        SmallVector<Value> dims = dimsOf(v.base, v.shape.size());
        for (int64_t k = 0; k < (int64_t)src.size(); ++k) {
          auto [g, inb] = globalSlot(v, slot(t.getShape(), k, layout), dims);
          auto ifOp = b_.create<scf::IfOp>(loc_, inb, /*withElse=*/false);
          OpBuilder::InsertionGuard guard(b_);
          b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
          b_.create<memref::StoreOp>(loc_, src[k], v.base, g);
        }
        return success();
      })
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
      .Case<BroadcastOp>([&](BroadcastOp bc) {
        TileType in = bc.getInput().getType(), out = bc.getType();
        const Dist& src = tiles_.at(bc.getInput());
        if (src.uniform) {
          tiles_[bc.getResult()] = src;
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
      })
      .Case<ReduceSumOp, ReduceMaxOp>([&](auto r) {
        bool isMax = isa<ReduceMaxOp>(r.getOperation());
        TileType in = r.getInput().getType(), out = r.getType();
        int64_t dim = r.getDim();
        Value buf = stage(tiles_.at(r.getInput()), in, 0); // uniform inputs are materialised
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
        tiles_[r.getResult()] = Dist{res, {}, false};
        return success();
      })
      .Case<NegOp, ExpOp, Exp2Op, LogOp, SqrtOp, RsqrtOp, TanhOp, AddOp, SubOp, MulOp, DivOp,
            MaxOp, MinOp, ScaleOp, CastOp>([&](Operation* e) {
        auto t = cast<TileType>(e->getResult(0).getType());
        SmallVector<const Dist*> ins;
        for (Value v : e->getOperands()) ins.push_back(&tiles_.at(v));
        bool uniform = llvm::all_of(ins, [](const Dist* d) { return d->uniform; });
        Layout layout; // tensor-core results stay in their layout; others meet them there
        for (const Dist* d : ins)
          if (!d->uniform && (d->layout.kind == Layout::Mma || layout.kind != Layout::Mma)) layout = d->layout;
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
      })
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

// SIMT dot: operands in shared memory, each thread accumulates its blocked elements.
Dist GpuKernelLowering::dotSimt(DotOp d) {
  TileType at = d.getLhs().getType(), bt = d.getRhs().getType(), ct = d.getType();
  int64_t N = ct.getShape()[1], K = at.getShape()[1];
  Elems acc = as(tiles_.at(d.getAcc()), ct, Layout{}); // before the operands take the scratch
  int64_t aBytes = at.getNumElements() * (at.getElementType().getIntOrFloatBitWidth() / 8);
  auto bufs = stageOperands({d.getLhs(), d.getRhs()}, {0, (aBytes + 15) / 16 * 16});
  Value sa = bufs[0], sb = bufs[1];
  SmallVector<Slot> slots;
  for (int64_t k = 0; k < (int64_t)acc.size(); ++k) slots.push_back(slot(ct.getShape(), k));
  auto loop = b_.create<scf::ForOp>(loc_, cidx(0), cidx(K), cidx(1), ValueRange(acc));
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPointToStart(loop.getBody());
  Value kk = loop.getInductionVar();
  Elems next;
  for (auto [k, s] : llvm::enumerate(slots)) {
    Value ai = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, s.coords[0], cidx(K)), kk);
    Value bi = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, kk, cidx(N)), s.coords[1]);
    Value prod = b_.create<arith::MulFOp>(loc_, toF32(b_.create<memref::LoadOp>(loc_, sa, ai)),
                                          toF32(b_.create<memref::LoadOp>(loc_, sb, bi)));
    next.push_back(b_.create<arith::AddFOp>(loc_, loop.getRegionIterArgs()[k], prod));
  }
  b_.create<scf::YieldOp>(loc_, next);
  return Dist{Elems(loop.getResults()), {}, false};
}

// Tensor-core dot: A and B staged row-major in shared memory, fragments loaded per k-step
// of 16, one mma.sync.m16n8k16 (f32 accumulate) per 16x8 fragment of the warp's tile.
Dist GpuKernelLowering::dotMma(DotOp d, const Layout& l) {
  TileType at = d.getLhs().getType(), ct = d.getType();
  Elems acc = as(tiles_.at(d.getAcc()), ct, l); // before the operands take the scratch
  int64_t aBytes = at.getNumElements() * 2;
  int64_t bOff = (aBytes + 15) / 16 * 16;
  auto bufs = stageOperands({d.getLhs(), d.getRhs()}, {0, bOff});
  return Dist{mmaLoop(bufs[0], bufs[1], at, ct, l, acc), l, false};
}

Elems GpuKernelLowering::mmaLoop(Value bufA, Value bufB, TileType at, TileType ct, const Layout& l, ValueRange acc) {
  Type e = at.getElementType();
  int64_t N = ct.getShape()[1], K = at.getShape()[1];
  // Fragments come from shared memory with ldmatrix: .x4 gives a 16x16 A fragment, .x2.trans
  // a 16x8 B fragment from row-major [K][N] (the transpose turns rows of B into the
  // k-pairs mma's "col" operand wants). Every row address is 16-byte aligned: K and N are
  // multiples of 8 and both buffers start on 16 bytes.
  Type i32 = b_.getI32Type();
  auto sharedAddr = [&](Value buf) { // the buffer's 32-bit address in the shared window
    Value p = b_.create<memref::ExtractAlignedPointerAsIndexOp>(loc_, buf);
    return b_.create<arith::IndexCastOp>(loc_, i32, p).getResult();
  };
  Value aBase = sharedAddr(bufA), bBase = sharedAddr(bufB);
  Value w = warp(), ln = lane();
  Value warpRow = b_.create<arith::MulIOp>(loc_, b_.create<arith::DivUIOp>(loc_, w, cidx(l.wn)), cidx(l.tm * 16));
  Value warpCol = b_.create<arith::MulIOp>(loc_, b_.create<arith::RemUIOp>(loc_, w, cidx(l.wn)), cidx(l.tn * 8));
  Value l16 = b_.create<arith::RemUIOp>(loc_, ln, cidx(16));
  Value aCol = b_.create<arith::MulIOp>(loc_, b_.create<arith::DivUIOp>(loc_, ln, cidx(16)), cidx(8));
  auto toI32 = [&](Value idx) { return b_.create<arith::IndexCastOp>(loc_, i32, idx).getResult(); };
  auto ldmatrix = [&](int n, bool trans, Value addr) {
    std::string text = "ldmatrix.sync.aligned.m8n8.x" + std::to_string(n) + (trans ? ".trans" : "") +
                       ".shared.b16 {";
    std::string cons;
    for (int r = 0; r < n; ++r) {
      text += (r ? ",$" : "$") + std::to_string(r);
      cons += "=r,";
    }
    text += "}, [$" + std::to_string(n) + "];";
    SmallVector<Type> regs(n, i32);
    auto st = LLVM::LLVMStructType::getLiteral(b_.getContext(), regs);
    auto op = b_.create<LLVM::InlineAsmOp>(loc_, st, ValueRange{addr}, text, cons + "r",
                                           /*has_side_effects=*/true, /*is_align_stack=*/false,
                                           LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr());
    SmallVector<Value> out;
    for (int r = 0; r < n; ++r)
      out.push_back(b_.create<LLVM::ExtractValueOp>(loc_, op.getResult(0), ArrayRef<int64_t>{r}));
    return out;
  };
  auto loop = b_.create<scf::ForOp>(loc_, cidx(0), cidx(K / 16), cidx(1), ValueRange(acc));
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPointToStart(loop.getBody());
  Value kStep = b_.create<arith::MulIOp>(loc_, loop.getInductionVar(), cidx(16));
  // A: lane l addresses row (l % 16) of the fragment at column (l / 16) * 8.
  auto aFrag = [&](int64_t tmi) {
    Value row = b_.create<arith::AddIOp>(loc_, warpRow, b_.create<arith::AddIOp>(loc_, l16, cidx(tmi * 16)));
    Value col = b_.create<arith::AddIOp>(loc_, kStep, aCol);
    Value flat = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, row, cidx(K)), col);
    return ldmatrix(4, false, b_.create<arith::AddIOp>(loc_, aBase, toI32(b_.create<arith::MulIOp>(loc_, flat, cidx(2)))));
  };
  // B: lanes 0-15 address rows k..k+15 of the 16x8 block at column n (lanes 16-31 repeat).
  auto bFrag = [&](int64_t tni) {
    Value row = b_.create<arith::AddIOp>(loc_, kStep, l16);
    Value col = b_.create<arith::AddIOp>(loc_, warpCol, cidx(tni * 8));
    Value flat = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, row, cidx(N)), col);
    return ldmatrix(2, true, b_.create<arith::AddIOp>(loc_, bBase, toI32(b_.create<arith::MulIOp>(loc_, flat, cidx(2)))));
  };
  std::string asmText = std::string("mma.sync.aligned.m16n8k16.row.col.f32.") + (e.isBF16() ? "bf16.bf16" : "f16.f16") +
                        ".f32 {$0,$1,$2,$3}, {$4,$5,$6,$7}, {$8,$9}, {$10,$11,$12,$13};";
  auto f32 = b_.getF32Type();
  auto resT = LLVM::LLVMStructType::getLiteral(b_.getContext(), {f32, f32, f32, f32});
  Elems next(acc.size());
  ValueRange c = loop.getRegionIterArgs();
  SmallVector<SmallVector<Value>> bfrag;
  for (int64_t tni = 0; tni < l.tn; ++tni) bfrag.push_back(bFrag(tni));
  for (int64_t tmi = 0; tmi < l.tm; ++tmi) {
    SmallVector<Value> a = aFrag(tmi);
    for (int64_t tni = 0; tni < l.tn; ++tni) {
      int64_t base = (tmi * l.tn + tni) * 4;
      SmallVector<Value> ops{a[0], a[1], a[2], a[3], bfrag[tni][0], bfrag[tni][1],
                             c[base], c[base + 1], c[base + 2], c[base + 3]};
      auto mma = b_.create<LLVM::InlineAsmOp>(loc_, resT, ops, asmText,
                                              "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f", /*has_side_effects=*/false,
                                              /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
                                              LLVM::AsmDialectAttr(), ArrayAttr());
      for (int64_t r = 0; r < 4; ++r)
        next[base + r] = b_.create<LLVM::ExtractValueOp>(loc_, mma.getResult(0), ArrayRef<int64_t>{r});
    }
  }
  b_.create<scf::YieldOp>(loc_, next);
  return Elems(loop.getResults());
}

Value GpuKernelLowering::elementwise(Operation* op, ArrayRef<Value> x) { return kiln::emitScalar(b_, loc_, op, x); }

LogicalResult GpuKernelLowering::lowerLoop(LoopOp l) {
  // A carried tile takes the layout its body yields (an mma accumulator stays in
  // registers in mma layout across iterations), else its initial value's.
  auto yield = cast<YieldOp>(l.getBody().front().getTerminator());
  SmallVector<Layout> layouts;
  SmallVector<Value> inits;
  SmallVector<size_t> sizes;
  for (auto [i, init] : llvm::enumerate(l.getInits())) {
    auto t = cast<TileType>(init.getType());
    Layout lay = predictLayout(yield.getValues()[i]);
    const Dist& d = tiles_.at(init);
    if (lay.kind != Layout::Mma && !d.uniform) lay = d.layout;
    Elems e = as(d, t, lay);
    inits.append(e.begin(), e.end());
    sizes.push_back(e.size());
    layouts.push_back(lay);
  }
  Elems results;
  if (auto plan = pipelinePlan(l)) {
    // Pipelined when both operands' rows allow 16-byte cp.async (decided per launch, since
    // strides are launch values); the plain loop otherwise.
    auto base = [&](LoadOp ld) { return map_.lookup(ld.getView().getDefiningOp<ViewOp>().getTensor()); };
    Value aligned = andOf(rowsAligned(base(plan->a), plan->a.getType()),
                          rowsAligned(base(plan->b), plan->b.getType()));
    SmallVector<Type> types;
    for (Value v : inits) types.push_back(v.getType());
    auto ifOp = b_.create<scf::IfOp>(loc_, types, aligned, /*withElse=*/true);
    {
      OpBuilder::InsertionGuard guard(b_);
      b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
      b_.create<scf::YieldOp>(loc_, ValueRange(lowerLoopPipelined(l, *plan, inits)));
      b_.setInsertionPointToStart(&ifOp.getElseRegion().front());
      FailureOr<Elems> simple = lowerLoopSimple(l, layouts, inits);
      if (failed(simple)) return failure();
      b_.create<scf::YieldOp>(loc_, ValueRange(*simple));
    }
    results.assign(ifOp.getResults().begin(), ifOp.getResults().end());
  } else {
    FailureOr<Elems> simple = lowerLoopSimple(l, layouts, inits);
    if (failed(simple)) return failure();
    results = *simple;
  }
  size_t at = 0;
  for (auto [i, r] : llvm::enumerate(l.getResults())) {
    tiles_[r] = Dist{Elems(results.begin() + at, results.begin() + at + sizes[i]), layouts[i], false};
    at += sizes[i];
  }
  return success();
}

FailureOr<Elems> GpuKernelLowering::lowerLoopSimple(LoopOp l, ArrayRef<Layout> layouts, ArrayRef<Value> inits) {
  auto yield = cast<YieldOp>(l.getBody().front().getTerminator());
  auto loop = b_.create<scf::ForOp>(loc_, cidx(0), map_.lookup(l.getCount()), cidx(1), inits);
  OpBuilder::InsertionGuard guard(b_);
  // With nothing carried, scf.for comes with its yield; we write our own below.
  if (loop.getBody()->mightHaveTerminator()) loop.getBody()->getTerminator()->erase();
  b_.setInsertionPointToEnd(loop.getBody());
  map_.map(l.getInductionVar(), loop.getInductionVar());
  size_t at = 0;
  for (auto [i, carried] : llvm::enumerate(l.getCarried())) {
    size_t n = perThread(cast<TileType>(carried.getType()).getShape(), layouts[i]);
    auto args = loop.getRegionIterArgs().slice(at, n);
    tiles_[carried] = Dist{Elems(args.begin(), args.end()), layouts[i], false};
    at += n;
  }
  if (failed(lowerBlock(l.getBody().front()))) return failure();
  SmallVector<Value> yields;
  for (auto [i, v] : llvm::enumerate(yield.getValues())) {
    Elems e = as(tiles_.at(v), cast<TileType>(v.getType()), layouts[i]);
    yields.append(e.begin(), e.end());
  }
  b_.create<scf::YieldOp>(loc_, yields);
  return Elems(loop.getResults());
}

std::optional<GpuKernelLowering::PipePlan> GpuKernelLowering::pipelinePlan(LoopOp l) {
  if (l.getStages() < 2 || l.getInits().size() != 1) return std::nullopt;
  Block& body = l.getBody().front();
  auto yield = cast<YieldOp>(body.getTerminator());
  auto dot = yield.getValues()[0].getDefiningOp<DotOp>();
  if (!dot || dot.getAcc() != l.getCarried()[0] || !dot->hasOneUse()) return std::nullopt;
  auto a = dot.getLhs().getDefiningOp<LoadOp>(), b = dot.getRhs().getDefiningOp<LoadOp>();
  if (!a || !b || !a->hasOneUse() || !b->hasOneUse() || !a.getPadding().isZero() || !b.getPadding().isZero())
    return std::nullopt;
  // The pipelined loop re-reads the operands each iteration: only right for loads made
  // in the body (a tile loaded before the loop may since have been overwritten).
  if (a->getBlock() != &body || b->getBlock() != &body) return std::nullopt;
  for (Operation& op : body.without_terminator())
    if (!isa<ViewOp, LoadOp, DotOp>(op) && op.getDialect()->getNamespace() != "arith") return std::nullopt;
  for (LoadOp ld : {a, b})
    if (ld.getType().getRank() != 2 || ld.getType().getShape()[1] % 8) return std::nullopt;
  auto layout = mmaLayoutFor(dot);
  if (!layout) return std::nullopt;
  return PipePlan{dot, a, b, *layout};
}

Value GpuKernelLowering::remat(Value v, LoopOp l, Value iv) {
  if (v == l.getInductionVar()) return iv;
  Operation* def = v.getDefiningOp();
  if (!def || def->getBlock() != &l.getBody().front()) return map_.lookup(v);
  IRMapping m;
  for (Value o : def->getOperands()) m.map(o, remat(o, l, iv));
  return b_.clone(*def, m)->getResult(0);
}

// Software pipeline, `stages` deep: the copies for iteration k + stages - 1 are in flight
// while iteration k computes. Each stage has its own A and B buffers; cp.async groups are
// committed one per iteration (empty ones too), so waiting until at most stages-2 groups
// are pending means iteration k's copies (this thread's) landed; the barrier after makes
// everyone's visible and also tells that every thread finished iteration k-1, whose
// buffers the next copies overwrite.
Elems GpuKernelLowering::lowerLoopPipelined(LoopOp l, PipePlan p, const Elems& init) {
  int64_t S = l.getStages();
  TileType at = p.a.getType(), bt = p.b.getType(), ct = p.dot.getType();
  int64_t aBytes = (at.getNumElements() * 2 + 15) / 16 * 16;
  int64_t bBytes = (bt.getNumElements() * 2 + 15) / 16 * 16;
  int64_t stageBytes = aBytes + bBytes;
  Value count = map_.lookup(l.getCount());
  auto viewAt = [&](LoadOp ld, Value iv) {
    auto view = ld.getView().getDefiningOp<ViewOp>();
    ViewInfo info{map_.lookup(view.getTensor()), {}, llvm::to_vector(view.getType().getShape())};
    for (auto [d, idx] : llvm::enumerate(view.getIndices()))
      info.offsets.push_back(b_.create<arith::MulIOp>(loc_, remat(idx, l, iv), cidx(info.shape[d])));
    return info;
  };
  auto buffers = [&](Value iter) {
    Value slot = b_.create<arith::RemUIOp>(loc_, iter, cidx(S));
    Value off = b_.create<arith::MulIOp>(loc_, slot, cidx(stageBytes));
    Value bufA = sharedAt(at.getNumElements(), at.getElementType(), off, S * stageBytes);
    Value bufB = sharedAt(bt.getNumElements(), bt.getElementType(),
                          b_.create<arith::AddIOp>(loc_, off, cidx(aBytes)), S * stageBytes);
    return std::make_pair(bufA, bufB);
  };
  auto issue = [&](Value iter) { // copies of iteration `iter`, if it exists; then commit
    Value exists = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::slt, iter, count);
    auto ifOp = b_.create<scf::IfOp>(loc_, exists, /*withElse=*/false);
    {
      OpBuilder::InsertionGuard guard(b_);
      b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
      auto [bufA, bufB] = buffers(iter);
      asyncCopy(viewAt(p.a, iter), at, bufA);
      asyncCopy(viewAt(p.b, iter), bt, bufB);
    }
    b_.create<NVVM::CpAsyncCommitGroupOp>(loc_);
  };
  barrier(); // the scratch may hold an earlier op's data still being read
  for (int64_t s = 0; s < S - 1; ++s) issue(cidx(s));
  auto loop = b_.create<scf::ForOp>(loc_, cidx(0), count, cidx(1), ValueRange(init));
  {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(loop.getBody());
    Value kk = loop.getInductionVar();
    b_.create<NVVM::CpAsyncWaitGroupOp>(loc_, S - 2);
    barrier();
    issue(b_.create<arith::AddIOp>(loc_, kk, cidx(S - 1)));
    auto [bufA, bufB] = buffers(kk);
    b_.create<scf::YieldOp>(loc_, ValueRange(mmaLoop(bufA, bufB, at, ct, p.layout, loop.getRegionIterArgs())));
  }
  b_.create<NVVM::CpAsyncWaitGroupOp>(loc_, 0); // drain the trailing (empty) groups
  barrier();
  return Elems(loop.getResults());
}

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
