#include "portable/Layouts.h"

#include "Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <cstdlib>
#include <functional>
#include <optional>

namespace kiln {
#define GEN_PASS_DEF_KILNASSIGNLAYOUTS
#include "Transforms/Passes.h.inc"
} // namespace kiln

namespace kiln::portable {

using namespace mlir;
using namespace kiln::tile;

namespace {
/// Whether `d` works on whole rows: its result (through elementwise ops) is reduced along
/// its rows, or its accumulator is scaled by a row broadcast (attention's two products).
/// Such a dot keeps each row in one warp (wn = 1): its row reductions are shuffles within
/// the warp and its row broadcasts stay in registers.
bool worksOnRows(DotOp d) {
  std::function<bool(Value, int)> reducedByRows = [&](Value v, int depth) {
    if (depth > 16) return false;
    for (Operation* u : v.getUsers()) {
      if (isa<ReduceSumOp, ReduceMaxOp>(u) && u->getAttrOfType<IntegerAttr>("dim").getInt() == 1) return true;
      if (u->hasTrait<OpTrait::Elementwise>() && u->getNumResults() == 1 && reducedByRows(u->getResult(0), depth + 1))
        return true;
    }
    return false;
  };
  std::function<bool(Value, int)> rowBroadcast = [&](Value v, int depth) {
    Operation* def = v.getDefiningOp();
    if (!def || depth > 16) return false;
    if (auto bc = dyn_cast<BroadcastOp>(def)) return bc.getDims().size() == 1 && bc.getDims()[0] == 0;
    if (!def->hasTrait<OpTrait::Elementwise>()) return false;
    return llvm::any_of(def->getOperands(), [&](Value o) { return rowBroadcast(o, depth + 1); });
  };
  return reducedByRows(d.getResult(), 0) || rowBroadcast(d.getAcc(), 0);
}
} // namespace

MmaLayoutAttr mmaLayoutFor(DotOp d, int64_t warps) {
  TileType a = d.getLhs().getType(), c = d.getType();
  Type e = a.getElementType();
  if (!(e.isBF16() || e.isF16())) return {};
  int64_t M = c.getShape()[0], N = c.getShape()[1], K = a.getShape()[1], W = warps;
  if (M % 16 || N % 8 || K % 16) return {};
  const bool rows = worksOnRows(d) && M % (16 * W) == 0;
  std::optional<std::array<int64_t, 4>> best; // warps M, N; fragments M, N
  for (int64_t wm = 1; wm <= W; ++wm) {
    if (W % wm) continue;
    int64_t wn = W / wm;
    if (M % (16 * wm) || N % (8 * wn) || (rows && wn != 1)) continue;
    std::array<int64_t, 4> l{wm, wn, M / (16 * wm), N / (8 * wn)};
    // Prefer square warp tiles: fewest fragment loads per mma.
    auto cost = [](const std::array<int64_t, 4>& x) { return std::abs(x[2] * 16 - x[3] * 8); };
    if (!best || cost(l) < cost(*best)) best = l;
  }
  if (!best) return {};
  return MmaLayoutAttr::get(d.getContext(), (*best)[0], (*best)[1], (*best)[2], (*best)[3]);
}

namespace {
/// The mma layout of shape `shape` (rank 2) whose rows are those of `rows` (an mma layout):
/// the same warps and row fragments, as many column fragments as N takes. Null when N does
/// not split so.
MmaLayoutAttr withRowsOf(MmaLayoutAttr rows, ArrayRef<int64_t> shape) {
  const int64_t wn = rows.getWarpsN();
  if (shape.size() != 2 || shape[1] % (8 * wn) || shape[0] != rows.getWarpsM() * rows.getFragsM() * 16) return {};
  return MmaLayoutAttr::get(rows.getContext(), rows.getWarpsM(), wn, rows.getFragsM(), shape[1] / (8 * wn));
}

/// A row reduction of an mma tile: its rows layout (the same attribute on the rank-1 result).
bool isRowReduce(Operation* op) {
  return isa<ReduceSumOp, ReduceMaxOp>(op) && op->getAttrOfType<IntegerAttr>("dim").getInt() == 1 &&
         cast<TileType>(op->getOperand(0).getType()).getRank() == 2;
}
/// A rank-1 tile repeated along the columns: [R] -> [R, C].
bool isRowBroadcast(BroadcastOp bc) {
  return bc.getDims().size() == 1 && bc.getDims()[0] == 0 && bc.getInput().getType().getRank() == 1 &&
         bc.getType().getRank() == 2;
}

Attribute predict(Value v, int64_t warps, int depth) {
  Operation* def = v.getDefiningOp();
  if (depth > 64 || !def) return {};
  if (auto d = dyn_cast<DotOp>(def)) return mmaLayoutFor(d, warps);
  if (isRowReduce(def)) return dyn_cast_or_null<MmaLayoutAttr>(predict(def->getOperand(0), warps, depth + 1));
  if (auto bc = dyn_cast<BroadcastOp>(def); bc && isRowBroadcast(bc))
    if (auto m = dyn_cast_or_null<MmaLayoutAttr>(predict(bc.getInput(), warps, depth + 1)))
      return withRowsOf(m, bc.getType().getShape());
  if (def->hasTrait<OpTrait::Elementwise>())
    for (Value o : def->getOperands())
      if (Attribute l = predict(o, warps, depth + 1)) return l;
  return {};
}
} // namespace

Attribute predictLayout(Value v, int64_t warps) {
  if (Attribute l = predict(v, warps, 0)) return l;
  return BlockedLayoutAttr::get(v.getContext());
}

namespace {

/// Sets the encodings of one kernel's tiles, in program order, as kiln-lower-to-gpu lays
/// them out: loads, iotas, transposes and broadcasts (of a tile that varies) and reductions
/// are blocked; a dot is mma when it runs on the tensor cores, else blocked; an elementwise op
/// takes its operands' layout, an mma one before a blocked one; a loop's carried tiles take the
/// layout their body yields. Constants and splats (and what is computed from them alone) stay
/// uniform: no encoding. Where an operand's encoding differs from the one its user wants, a
/// value computed from coordinates alone (an iota, a mask made from iotas) is made again in
/// that encoding, anything else goes through a tile.convert_layout in front of the user.
/// (Without the encodings, kiln-lower-to-gpu lays every iota out blocked and converts.)
class Assigner {
public:
  Assigner(int64_t warps, MLIRContext* ctx) : warps_(warps), blocked_(BlockedLayoutAttr::get(ctx)) {}

  void block(Block& b) {
    for (Operation& op : llvm::make_early_inc_range(b)) visit(&op);
  }

  /// Erases what remake() left without users (the values it made again), and what only they
  /// used. Each op is in the list once: it is erased at most once.
  void eraseRemade() {
    while (!remade_.empty()) {
      Operation* op = remade_.pop_back_val();
      if (!op->use_empty() || !isPure(op)) continue;
      for (Value o : op->getOperands())
        if (Operation* d = o.getDefiningOp(); d && !llvm::is_contained(remade_, d)) remade_.push_back(d);
      op->erase();
    }
  }

private:
  static Attribute encodingOf(Value v) { return cast<TileType>(v.getType()).getEncoding(); }
  static void setEncoding(Value v, Attribute e) { v.setType(cast<TileType>(v.getType()).withEncoding(e)); }

  /// `v` made again in encoding `e` in front of `b`'s insertion point, when it is computed
  /// from coordinates alone (tile.iota, and elementwise ops over those and uniform tiles):
  /// cheaper than moving it through shared memory. Null when it is not.
  Value remake(Value v, Attribute e, OpBuilder& b, int depth = 0) {
    if (encodingOf(v) == e) return v;
    auto as = [&](Value uniform) { // costs nothing: a uniform tile is in every layout
      return b.create<ConvertLayoutOp>(v.getLoc(), cast<TileType>(v.getType()).withEncoding(e), uniform).getResult();
    };
    if (!encodingOf(v)) return as(v);
    Operation* def = v.getDefiningOp();
    if (!def || depth > 16) return {};
    if (auto cv = dyn_cast<ConvertLayoutOp>(def); cv && !encodingOf(cv.getInput())) return as(cv.getInput());
    if (auto io = dyn_cast<IotaOp>(def))
      return b.create<IotaOp>(io.getLoc(), io.getType().withEncoding(e), io.getDimAttr()).getResult();
    if (!def->hasTrait<OpTrait::Elementwise>() || def->getNumResults() != 1) return {};
    IRMapping m;
    for (Value o : def->getOperands()) {
      Value r = remake(o, e, b, depth + 1);
      if (!r) return {};
      m.map(o, r);
    }
    Operation* c = b.clone(*def, m);
    setEncoding(c->getResult(0), e);
    return c->getResult(0);
  }

  /// Operand `i` of `user` in encoding `e`: made again there when it comes from coordinates
  /// alone (remake), else through a tile.convert_layout.
  void want(Operation* user, unsigned i, Attribute e) {
    Value v = user->getOperand(i);
    if (encodingOf(v) == e) return;
    OpBuilder b(user);
    if (e)
      if (Value r = remake(v, e, b)) {
        if (Operation* def = v.getDefiningOp(); def && !llvm::is_contained(remade_, def)) remade_.push_back(def);
        return user->setOperand(i, r);
      }
    auto cvt = b.create<ConvertLayoutOp>(user->getLoc(), cast<TileType>(v.getType()).withEncoding(e), v);
    user->setOperand(i, cvt.getResult());
  }

  void visit(Operation* op) {
    if (auto l = dyn_cast<LoopOp>(op)) return loop(l);
    if (isa<GridOp>(op)) {
      for (Region& r : op->getRegions())
        for (Block& b : r) block(b);
      return;
    }
    // A row reduction of an mma tile stays in its rows (shuffles, no trip through shared
    // memory), and a rank-1 tile in rows broadcast along the columns is an mma tile again.
    if (isRowReduce(op))
      if (auto m = dyn_cast_or_null<MmaLayoutAttr>(encodingOf(op->getOperand(0))))
        return setEncoding(op->getResult(0), m);
    if (auto bc = dyn_cast<BroadcastOp>(op); bc && isRowBroadcast(bc))
      if (auto m = dyn_cast_or_null<MmaLayoutAttr>(encodingOf(bc.getInput())))
        if (MmaLayoutAttr r = withRowsOf(m, bc.getType().getShape())) return setEncoding(bc.getResult(), r);
    if (isa<LoadOp, ReduceSumOp, ReduceMaxOp, IotaOp>(op)) return setEncoding(op->getResult(0), blocked_);
    if (auto tr = dyn_cast<TransposeOp>(op))
      return setEncoding(tr.getResult(), encodingOf(tr.getInput()) ? blocked_ : Attribute());
    if (auto bc = dyn_cast<BroadcastOp>(op))
      return setEncoding(bc.getResult(), encodingOf(bc.getInput()) ? blocked_ : Attribute());
    if (auto d = dyn_cast<DotOp>(op)) {
      Attribute e = mmaLayoutFor(d, warps_);
      if (!e) e = blocked_;
      setEncoding(d.getResult(), e);
      want(op, d.getAccMutable().getOperandNumber(), e);
      return;
    }
    if (op->hasTrait<OpTrait::Elementwise>() && op->getNumResults() == 1 && isa<TileType>(op->getResult(0).getType())) {
      Attribute e; // the walker's rule: the last operand that varies, an mma one winning
      for (Value v : op->getOperands())
        if (Attribute x = encodingOf(v); x && (isa<MmaLayoutAttr>(x) || !isa_and_nonnull<MmaLayoutAttr>(e))) e = x;
      if (!e) return; // all uniform
      for (unsigned i = 0; i < op->getNumOperands(); ++i) want(op, i, e);
      setEncoding(op->getResult(0), e);
    }
  }

  void loop(LoopOp l) {
    auto yield = cast<YieldOp>(l.getBody().front().getTerminator());
    // An mma accumulator stays in mma layout across iterations; anything else keeps the
    // layout of its initial value (blocked when that is uniform).
    SmallVector<Attribute> carried;
    for (auto [y, init] : llvm::zip(yield.getValues(), l.getInits())) {
      Attribute e = predictLayout(y, warps_);
      if (!isa<MmaLayoutAttr>(e) && encodingOf(init)) e = encodingOf(init);
      carried.push_back(e);
    }
    for (auto [i, e] : llvm::enumerate(carried)) {
      want(l, l.getInitsMutable()[i].getOperandNumber(), e);
      setEncoding(l.getCarried()[i], e);
      setEncoding(l.getResult(i), e);
    }
    block(l.getBody().front());
    for (auto [i, e] : llvm::enumerate(carried)) want(yield, unsigned(i), e);
  }

  int64_t warps_;
  Attribute blocked_;
  SmallVector<Operation*> remade_;
};

} // namespace

void assignLayouts(KernelOp kernel, int64_t warps) {
  Assigner a(warps, kernel.getContext());
  a.block(kernel.getBody().front());
  a.eraseRemade();
}

namespace {
struct AssignLayoutsPass : kiln::impl::KilnAssignLayoutsBase<AssignLayoutsPass> {
  using KilnAssignLayoutsBase::KilnAssignLayoutsBase;
  void runOnOperation() override {
    if (numWarps < 1 || numWarps > 32) {
      getOperation().emitError("num-warps must be 1..32, got ") << numWarps;
      return signalPassFailure();
    }
    getOperation().walk([&](KernelOp k) { assignLayouts(k, numWarps); });
  }
};
} // namespace

} // namespace kiln::portable
