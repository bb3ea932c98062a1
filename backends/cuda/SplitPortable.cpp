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

struct KilnSplitPortable : impl::KilnSplitPortableBase<KilnSplitPortable> {
  void runOnOperation() override {
    for (auto gm : llvm::to_vector(getOperation().getOps<gpu::GPUModuleOp>())) {
      SmallVector<gpu::GPUFuncOp> portable;
      bool twins = false;
      for (auto f : gm.getOps<gpu::GPUFuncOp>()) {
        if (isTwin(f)) twins = true;
        else if (f.isKernel()) portable.push_back(f);
      }
      if (!twins || portable.empty()) continue;
      OpBuilder b(gm);
      b.setInsertionPointAfter(gm);
      auto out = b.create<gpu::GPUModuleOp>(gm.getLoc(), (gm.getName() + "_portable").str());
      if (auto targets = gm.getTargetsAttr()) out.setTargetsAttr(targets);
      // The globals (and declarations) a moved kernel names go with it as copies: the
      // twins may name them too.
      Block& body = out.getBodyRegion().front();
      OpBuilder into = OpBuilder::atBlockBegin(&body);
      for (Operation& op : gm.getBody()->getOperations()) {
        auto sym = dyn_cast<SymbolOpInterface>(&op);
        if (!sym || isa<gpu::GPUFuncOp>(op)) continue;
        for (gpu::GPUFuncOp f : portable)
          if (!SymbolTable::symbolKnownUseEmpty(sym.getNameAttr(), f)) {
            into.clone(op);
            break;
          }
      }
      for (gpu::GPUFuncOp f : portable) f->moveBefore(&body, body.end());
    }
  }
};

} // namespace
} // namespace kiln
