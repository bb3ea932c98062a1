// kiln-split-portable (Passes.td): a twin's module and its portable fallback's, apart.
#include "Transforms/Passes.h"
#include "hopper/LaunchPlan.h"

#include "mlir/IR/SymbolTable.h"

namespace kiln {
#define GEN_PASS_DEF_KILNSPLITPORTABLE
#include "Transforms/Passes.h.inc"
} // namespace kiln

namespace kiln {
namespace {

using namespace mlir;

bool isTwin(gpu::GPUFuncOp f) { return f->hasAttr(hopper::kLaunchPlanAttr); }

/// Moves `funcs` out of `gm` into a new gpu.module `name` right after `after` (same targets),
/// with copies of the globals and declarations they name; returns the new module.
gpu::GPUModuleOp moveInto(gpu::GPUModuleOp gm, ArrayRef<gpu::GPUFuncOp> funcs, StringRef name, Operation* after) {
  OpBuilder b(after);
  b.setInsertionPointAfter(after);
  auto out = b.create<gpu::GPUModuleOp>(gm.getLoc(), name);
  if (auto targets = gm.getTargetsAttr()) out.setTargetsAttr(targets);
  // The moved kernels' globals go with them as copies: the others may name them too.
  Block& body = out.getBodyRegion().front();
  OpBuilder into = OpBuilder::atBlockBegin(&body);
  for (Operation& op : gm.getBody()->getOperations()) {
    auto sym = dyn_cast<SymbolOpInterface>(&op);
    if (!sym || isa<gpu::GPUFuncOp>(op)) continue;
    for (gpu::GPUFuncOp f : funcs)
      if (!SymbolTable::symbolKnownUseEmpty(sym.getNameAttr(), f)) {
        into.clone(op);
        break;
      }
  }
  for (gpu::GPUFuncOp f : funcs) f->moveBefore(&body, body.end());
  return out;
}

struct KilnSplitPortable : impl::KilnSplitPortableBase<KilnSplitPortable> {
  using Base::Base;
  void runOnOperation() override {
    for (auto gm : llvm::to_vector(getOperation().getOps<gpu::GPUModuleOp>())) {
      SmallVector<gpu::GPUFuncOp> portable, twins;
      for (auto f : gm.getOps<gpu::GPUFuncOp>()) {
        if (isTwin(f)) twins.push_back(f);
        else if (f.isKernel()) portable.push_back(f);
      }
      if (twins.empty() || portable.empty()) continue;
      // In order: the first twin's module, the others' (twin-modules), the fallback's last.
      Operation* last = gm;
      if (twinModules)
        for (auto [i, f] : llvm::enumerate(ArrayRef(twins).drop_front()))
          last = moveInto(gm, {f}, (gm.getName() + "_twin" + Twine(i + 1)).str(), last);
      moveInto(gm, portable, (gm.getName() + "_portable").str(), last);
    }
  }
};

} // namespace
} // namespace kiln
