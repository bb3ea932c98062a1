#pragma once
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
// barriers; a row reduction folds within each thread and across lanes by shuffles first, and
// only its per-warp partials go through shared memory.
#include "Transforms/Passes.h"
//
// Internal: the portable lowering's state and its methods, one file per op family:
// TileToGPU.cpp (the pass, the walk over ops, distribution of elements over threads),
// portable/Memory.cpp (views, loads, stores, shared-memory staging, cp.async copies),
// portable/Elementwise.cpp (elementwise ops, broadcasts, layout conversions),
// portable/Reductions.cpp (sum and max along a dim), portable/DotMma.cpp (layouts and
// dot on mma.sync or SIMT), portable/Loops.cpp (tile.loop, plain and software-pipelined),
// portable/Layouts.cpp (kiln-assign-layouts).
#include "Dialect/Tile/TileDialect.h"
#include "Transforms/ScalarMath.h"
#include "portable/Layouts.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

#include <numbers>
#include <optional>

// The lowering reads as MLIR code: its names are unqualified (this header is included only
// by the lowering's own files).
namespace kiln::portable {
using namespace mlir;
using namespace kiln::tile;


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

inline int64_t numel(ArrayRef<int64_t> shape) {
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
  /// The tensor-core layout of `d` (portable/Layouts.h), if it runs on the tensor cores.
  std::optional<Layout> mmaLayoutFor(DotOp d);
  /// A layout attribute (#tile.mma or #tile.blocked) as the lowering's Layout.
  static Layout layoutFrom(Attribute a);
  /// `d` in layout `l` (materialising uniform tiles, converting through shared memory).
  Elems as(const Dist& d, TileType t, const Layout& l);
  Value lane() { return b_.create<arith::RemUIOp>(loc_, tid_, cidx(32)); }
  Value warp() { return b_.create<arith::DivUIOp>(loc_, tid_, cidx(32)); }
  Dist dotMma(DotOp d, const Layout& l);
  Dist dotSimt(DotOp d);
  Value linearize(ArrayRef<Value> coords, ArrayRef<int64_t> shape);
  /// Where view `v` reads, its indices lowered by `index` (a loop may recompute them).
  ViewInfo viewOf(ViewOp v, llvm::function_ref<Value(Value)> index);
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
  /// The k-loop of a tensor-core dot over operands already in shared memory; B row-major
  /// K x N, or with `bT` its transpose, N x K (the fragments mma's "col" operand wants).
  Elems mmaLoop(Value bufA, Value bufB, TileType at, TileType ct, const Layout& l, ValueRange acc, bool bT = false);
  /// The dot whose B operand `tr` is, when that dot runs on the tensor cores and reads
  /// tr's input in place of it (no transposed copy): tr's only use, in tr's block.
  DotOp foldsTranspose(TransposeOp tr);
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
  /// The loads of `l`'s body a plain loop issues one iteration ahead (Loops.cpp).
  SmallVector<LoadOp> prefetchable(LoopOp l);
  /// The elements load `ld` of loop `l`'s body reads at iteration `iv`.
  Elems loadAt(LoadOp ld, LoopOp l, Value iv);
  /// Loads lowered ahead by their loop (prefetchable): their tiles are set already.
  llvm::DenseSet<Operation*> prefetched_;

  LogicalResult lowerBlock(Block& block);
  LogicalResult lowerOp(Operation* op);
  LogicalResult lowerLoop(LoopOp op);                                  // Loops.cpp
  LogicalResult lowerLoad(LoadOp l);                                   // Memory.cpp
  LogicalResult lowerStore(StoreOp st);                                // Memory.cpp
  LogicalResult lowerElementwise(Operation* e);                        // Elementwise.cpp
  LogicalResult lowerBroadcast(BroadcastOp bc);                        // Elementwise.cpp
  LogicalResult lowerConvertLayout(ConvertLayoutOp c);                 // Elementwise.cpp
  LogicalResult lowerIota(IotaOp io);                                  // Elementwise.cpp
  LogicalResult lowerTranspose(TransposeOp tr);                        // Elementwise.cpp
  LogicalResult lowerReduce(Operation* op, Value input, int64_t dim, bool isMax); // Reductions.cpp
  /// The rows of `src` (rank 2) folded by shuffles, when its shape allows (Reductions.cpp).
  std::optional<Elems> reduceRows(const Dist& src, TileType in, TileType out, bool isMax);
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
  /// Transposes a tensor-core dot reads untransposed (foldsTranspose): result -> input.
  DenseMap<Value, Value> transposedOf_;
};

} // namespace kiln::portable
