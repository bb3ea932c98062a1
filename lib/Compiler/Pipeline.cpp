#include "Compiler/Pipeline.h"

#include "Dialect/Tile/TileDialect.h"
#include "Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln::detail {

void runTilePasses(mlir::ModuleOp m, DiagnosticCollector& diags, const std::string& name) {
  mlir::PassManager pm(m.getContext());
  pm.nest<tile::KernelOp>().addPass(kiln::createKilnExpandComposites());
  pm.addPass(createCanonicalizer());
  if (mlir::failed(pm.run(m)))
    diags.fail(ErrorKind::CompileFailed, "kernel '" + name + "': tile passes failed");
}

std::unique_ptr<mlir::Pass> createCanonicalizer() {
  static const std::vector<std::string> kSlow = {"(anonymous namespace)::RemoveDuplicateSuccessorInputUses",
                                                 "(anonymous namespace)::MakeRegionBranchOpSuccessorInputsDead",
                                                 "(anonymous namespace)::RemoveDeadRegionBranchOpSuccessorInputs"};
  return mlir::createCanonicalizerPass(mlir::GreedyRewriteConfig(), kSlow);
}

std::string printOp(mlir::Operation* op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  op->print(os);
  return s;
}

} // namespace kiln::detail
