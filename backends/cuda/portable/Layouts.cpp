#include "portable/Layouts.h"

#include "Transforms/Passes.h"

#include "mlir/IR/Builders.h"

#include <cstdlib>
#include <optional>

namespace kiln {
#define GEN_PASS_DEF_KILNASSIGNLAYOUTS
#include "Transforms/Passes.h.inc"
} // namespace kiln

namespace kiln::portable {

using namespace mlir;
using namespace kiln::tile;

MmaLayoutAttr mmaLayoutFor(DotOp d, int64_t warps) {
  TileType a = d.getLhs().getType(), c = d.getType();
  Type e = a.getElementType();
  if (!(e.isBF16() || e.isF16())) return {};
  int64_t M = c.getShape()[0], N = c.getShape()[1], K = a.getShape()[1], W = warps;
  if (M % 16 || N % 8 || K % 16) return {};
  std::optional<std::array<int64_t, 4>> best; // warps M, N; fragments M, N
  for (int64_t wm = 1; wm <= W; ++wm) {
    if (W % wm) continue;
    int64_t wn = W / wm;
    if (M % (16 * wm) || N % (8 * wn)) continue;
    std::array<int64_t, 4> l{wm, wn, M / (16 * wm), N / (8 * wn)};
    // Prefer square warp tiles: fewest fragment loads per mma.
    auto cost = [](const std::array<int64_t, 4>& x) { return std::abs(x[2] * 16 - x[3] * 8); };
    if (!best || cost(l) < cost(*best)) best = l;
  }
  if (!best) return {};
  return MmaLayoutAttr::get(d.getContext(), (*best)[0], (*best)[1], (*best)[2], (*best)[3]);
}

namespace {
Attribute predict(Value v, int64_t warps, int depth) {
  Operation* def = v.getDefiningOp();
  if (depth > 64 || !def) return {};
  if (auto d = dyn_cast<DotOp>(def)) return mmaLayoutFor(d, warps);
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

void assignLayouts(KernelOp kernel, int64_t warps) {
  MLIRContext* ctx = kernel.getContext();
  kernel.walk([&](DotOp d) {
    Attribute l = mmaLayoutFor(d, warps);
    d->setAttr(kLayoutAttr, l ? l : BlockedLayoutAttr::get(ctx));
  });
  kernel.walk([&](LoopOp l) {
    SmallVector<Attribute> carried;
    for (Value y : cast<YieldOp>(l.getBody().front().getTerminator()).getValues())
      carried.push_back(predictLayout(y, warps));
    l->setAttr(kCarriedLayoutsAttr, ArrayAttr::get(ctx, carried));
  });
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
