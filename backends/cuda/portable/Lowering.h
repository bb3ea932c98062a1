#pragma once
// kiln-lower-to-gpu: the CUDA backend's portable (sm_80+) lowering of tile kernels.
//
// A tile value is distributed over the CTA's T threads as plain SSA values (registers), in
// one of three layouts:
//  - blocked: thread t holds elements t, t+T, t+2T, ... of the row-major tile, so
//    consecutive threads touch consecutive addresses (loads and stores coalesce).
//    Elements past N on the last step are "phantoms": their coordinates are clamped into
//    the tile so every address stays valid, and they are never written anywhere;
//  - mma: the accumulator layout of the tensor cores' mma.sync.m16n8k16 — warps tile the
//    result wm x wn, each warp holds tm x tn fragments of 16x8, four f32 per thread each;
//  - mma rows (a rank-1 tile in #tile.mma): the rows of an mma layout, each thread holding
//    the 2 tm rows its fragments cover; a row reduction of an accumulator lands there, and
//    broadcasts back onto it without leaving the registers.
// A dot of bf16/f16 tiles whose shape fits runs on the tensor cores and yields an mma tile;
// elementwise ops keep their operands' layout; loop-carried tiles take the layout their
// loop yields. Ops that need another thread's elements (dot operands, broadcast, reduce,
// a change of layout) stage them in one dynamic shared-memory scratch buffer between two
// barriers; a row reduction folds within each thread and across lanes by shuffles first, and
// only its per-warp partials go through shared memory (none when a warp holds whole rows).
// A loop keeps some operands in shared memory below the scratch (scratchBase_): a dot's
// loop-invariant A, staged once, and a two-slot ring per dot operand it loads (Loops.cpp).
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
  /// MmaRows: a rank-1 tile holding the rows of an Mma layout (#tile.mma on a rank-1 tile):
  /// each thread the 2 tm rows its accumulator fragments cover, copied over the quad and the
  /// wn warps along N. Equal for every Mma layout of the same wm, wn and tm.
  enum Kind { Blocked, Mma, MmaRows } kind = Blocked;
  int64_t wm = 1, wn = 1; ///< Mma: warps along M and N
  int64_t tm = 1, tn = 1; ///< Mma: 16x8 fragments per warp along M and N
  bool isMma() const { return kind == Mma || kind == MmaRows; }
  bool operator==(const Layout& o) const {
    if (kind != o.kind) return false;
    if (kind == Blocked) return true;
    return wm == o.wm && wn == o.wn && tm == o.tm && (kind == MmaRows || tn == o.tn);
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
    if (l.kind == Layout::Mma) return l.tm * l.tn * 4;
    if (l.kind == Layout::MmaRows) return l.tm * 2;
    return (numel(shape) + T_ - 1) / T_;
  }
  Slot slot(ArrayRef<int64_t> shape, int64_t k, const Layout& l = {});
  Slot mmaSlot(int64_t k, const Layout& l);
  /// Element k of a thread in an MmaRows layout: row 16 (tm wmI + k / 2) + lane / 4 + 8 (k % 2).
  Slot mmaRowSlot(int64_t k, const Layout& l);
  /// This thread's row of element k of an Mma layout, as an index into its MmaRows elements.
  static int64_t rowOfMma(int64_t k, const Layout& l) { return (k / 4 / l.tn) * 2 + (k % 4) / 2; }
  /// The tensor-core layout of `d` (portable/Layouts.h), if it runs on the tensor cores.
  std::optional<Layout> mmaLayoutFor(DotOp d);
  /// A layout attribute (#tile.mma or #tile.blocked) on a tile of rank `rank` as the
  /// lowering's Layout (#tile.mma on rank 1: MmaRows).
  static Layout layoutFrom(Attribute a, int64_t rank = 2);
  static Layout layoutOf(Type tile) {
    auto t = cast<TileType>(tile);
    return layoutFrom(t.getEncoding(), t.getRank());
  }
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
  /// Writes a distributed tile into shared memory (row-major, rows `pitch` elements apart;
  /// 0: packed), fenced by barriers.
  Value stage(const Dist& d, TileType t, int64_t byteOffset, int64_t pitch = 0);
  /// The unfenced part of stage(): this thread's elements into `buf`.
  void write(const Dist& d, TileType t, Value buf, int64_t pitch = 0);
  /// The row pitch (in elements) of a dot operand staged in shared memory: 16-bit rows of a
  /// multiple of 32 bytes get 16 bytes of padding, so the 8 rows an ldmatrix reads (16 bytes
  /// each, at one column) fall in 8 different 4-bank groups instead of 2 to 8 colliding in
  /// the same (a 256-byte row put all 8 in one: 8-way conflicts on every fragment load).
  static int64_t pitchOf(TileType t) {
    return t.getRank() == 2 ? pitchFor(t.getShape()[1], t.getElementType()) : t.getShape().back();
  }
  static int64_t pitchFor(int64_t cols, Type elt) {
    return elt.getIntOrFloatBitWidth() == 16 && cols % 16 == 0 ? cols + 8 : cols;
  }
  /// Bytes of a dot operand staged at pitchOf, rounded up to 16.
  static int64_t stagedBytes(TileType t) {
    const int64_t rows = t.getRank() == 2 ? t.getShape()[0] : 1;
    return (rows * pitchOf(t) * (t.getElementType().getIntOrFloatBitWidth() / 8) + 15) / 16 * 16;
  }
  /// Stages a dot's operands at their pitchOf: tiles loaded only for this dot go global ->
  /// shared directly (cp.async, 16 bytes at a time), the rest from registers; one barrier
  /// pair for all.
  SmallVector<Value> stageOperands(ArrayRef<Value> tiles, ArrayRef<int64_t> byteOffsets);
  /// Copies the window `v` of a tile of type `t` from global memory into `buf`.
  /// With `commit`, the cp.async copies form a group of their own; else the caller commits.
  void copyGlobalToShared(const ViewInfo& v, TileType t, Value buf, int64_t pitch, bool commit = true);
  /// i1: the rows of `base` are 16-byte aligned (unit inner stride, row stride and base
  /// multiples of 16 bytes), so tiles of `t` can be copied 16 bytes at a time.
  Value rowsAligned(Value base, TileType t);
  /// `base` (rank 2) typed with a static unit inner stride; the caller has checked it is 1.
  Value unitInnerStride(Value base);
  /// Stores an mma-layout tile, two adjacent columns per vector store where the row
  /// stride and base allow it, element by element elsewhere.
  void storeMmaPairs(const ViewInfo& v, TileType t, const Layout& layout, const Elems& src);
  /// Issues this thread's 16-byte cp.async copies of window `v` into `buf` (no commit).
  void asyncCopy(const ViewInfo& v, TileType t, Value buf, int64_t pitch);
  /// The k-loop of a tensor-core dot over operands already in shared memory; B row-major
  /// K x N, or with `bT` its transpose, N x K (the fragments mma's "col" operand wants).
  /// `buf`'s 32-bit address in the shared window.
  Value sharedAddr32(Value buf);
  /// ldmatrix .x`n` (.trans when `trans`) at this lane's shared address `addr`: n i32 registers.
  SmallVector<Value> ldmatrix(int n, bool trans, Value addr);
  /// A's fragment `tmi` of this warp at column `kStep`, A staged row-major at `aBase`.
  SmallVector<Value> aFragShared(Value aBase, TileType at, const Layout& l, Value kStep, int64_t tmi);
  /// A operand fragments in registers: [k-step][row fragment] -> mma's four A registers.
  using AFrags = SmallVector<SmallVector<SmallVector<Value, 4>>>;
  /// With `regs`, A's fragments are those (bufA unused) and the k-steps are unrolled.
  Elems mmaLoop(Value bufA, Value bufB, TileType at, TileType ct, const Layout& l, ValueRange acc, bool bT = false,
                const AFrags* regs = nullptr);
  /// `a`'s elements as A fragments of a dot in layout `l`, when `a` is an accumulator of the
  /// same rows (DotMma.cpp); empty otherwise.
  AFrags aFragsFromAccumulator(const Dist& a, TileType at, const Layout& l);
  /// Before loop `l`: the A operands of the tensor-core dots in its body that are made
  /// outside it, staged once into shared memory the loop's scratch starts after (Loops.cpp).
  /// Returns scratchBase_ as it was, for after the loop.
  int64_t hoistLoopInvariantA(LoopOp l);
  /// Dots whose A operand is staged already (hoistLoopInvariantA): its shared buffer.
  DenseMap<Operation*, Value> residentA_;
  /// Where the scratch starts in the dynamic shared memory: past operands kept resident for
  /// the loop being lowered.
  int64_t scratchBase_ = 0;
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
  /// As sharedAt, the offset counted from the start of the dynamic shared memory, not the
  /// scratch.
  Value sharedAbs(int64_t n, Type elt, Value byteOffset, int64_t maxEnd);
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
  /// `ld` is in `l`'s body and reads an input tensor at a view computed from the induction
  /// variable (by index arithmetic): it can be issued for another iteration.
  bool loadsAtIv(LoopOp l, LoadOp ld);
  /// A dot operand loaded in a plain loop, copied one iteration ahead into a two-slot ring
  /// at byte `offset` of the dynamic shared memory (slot 1 a ring's total size later).
  struct Ring {
    LoadOp ld;
    int64_t offset;
  };
  SmallVector<Ring> ringLoads(LoopOp l);
  /// Ring loads' tiles in this iteration's slot: the dot reads them there (stageOperands).
  DenseMap<Value, Value> ringBuf_;
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
  std::optional<Dist> reduceRows(const Dist& src, TileType in, TileType out, bool isMax);
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
