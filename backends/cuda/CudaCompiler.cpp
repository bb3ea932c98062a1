#include "CudaCompiler.h"
#include "Runtime/Nvtx.h"
#include "Runtime/ParallelFor.h"
#include "Runtime/Throw.h"
#include "Target.h"
#include "hopper/Twins.h"

#include <algorithm>
#include <future>

#include "Compiler/KernelImpl.h"
#include "Compiler/Pipeline.h"
#include "Dialect/Tile/TileDialect.h"
#include "Transforms/Passes.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVGPUToNVVM/NVGPUToNVVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Interfaces/DataLayoutInterfaces.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/GPU/IR/CompilationInterfaces.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

namespace kiln::cuda {

using namespace mlir;
using detail::DiagnosticCollector;
using Clock = std::chrono::steady_clock;

void checkArch(const std::string& arch) { (void)cudaTarget(arch); }

namespace {

using detail::GridExpr;

int buildExpr(detail::GridPlan& plan, Value v, const std::string& name) {
  GridExpr e;
  Operation* def = v.getDefiningOp();
  auto binary = [&](GridExpr::Kind k) {
    e.kind = k;
    e.lhs = buildExpr(plan, def->getOperand(0), name);
    e.rhs = buildExpr(plan, def->getOperand(1), name);
  };
  if (auto d = dyn_cast_or_null<tile::DimOp>(def)) {
    e.kind = GridExpr::Sym;
    e.sym = d.getSymbol().str();
  } else if (auto c = dyn_cast_or_null<arith::ConstantIndexOp>(def)) {
    e.value = c.value();
  } else if (isa_and_nonnull<arith::AddIOp>(def)) binary(GridExpr::Add);
  else if (isa_and_nonnull<arith::SubIOp>(def)) binary(GridExpr::Sub);
  else if (isa_and_nonnull<arith::MulIOp>(def)) binary(GridExpr::Mul);
  else if (isa_and_nonnull<arith::CeilDivSIOp>(def)) binary(GridExpr::CeilDiv);
  else if (isa_and_nonnull<arith::FloorDivSIOp>(def)) binary(GridExpr::FloorDiv);
  else if (isa_and_nonnull<arith::DivSIOp>(def)) binary(GridExpr::Div);
  else if (isa_and_nonnull<arith::RemSIOp>(def)) binary(GridExpr::Rem);
  else if (isa_and_nonnull<arith::MinSIOp>(def)) binary(GridExpr::Min);
  else if (isa_and_nonnull<arith::MaxSIOp>(def)) binary(GridExpr::Max);
  else
    kiln::detail::throwError(ErrorKind::CompileFailed,
                "kernel '" + name + "': a tile.grid size must be computed from dims and constants "
                "with add, sub, mul, ceildiv, div, rem, min or max; got " +
                (def ? def->getName().getStringRef().str() : std::string("a block argument")));
  plan.nodes.push_back(e);
  return plan.nodes.size() - 1;
}

detail::GridPlan gridPlan(ModuleOp m, const std::string& name) {
  auto kernel = *m.getOps<tile::KernelOp>().begin();
  SmallVector<tile::GridOp> grids(kernel.getBody().front().getOps<tile::GridOp>());
  if (grids.size() > 1)
    kiln::detail::throwError(ErrorKind::Unsupported, "kernel '" + name + "' has " + std::to_string(grids.size()) +
                                            " tile.grid ops; the CUDA backend launches one grid per kernel");
  detail::GridPlan plan;
  if (grids.empty()) { // no grid: the whole kernel is one CTA
    plan.nodes.push_back(GridExpr{GridExpr::Const, 1, {}, -1, -1});
    plan.roots.push_back(0);
    return plan;
  }
  for (Value s : grids[0].getSizes()) plan.roots.push_back(buildExpr(plan, s, name));
  return plan;
}

/// convert-gpu-to-nvvm, minus its libdevice detour: upstream marks fabs, fma, sqrt, ...
/// illegal and calls __nv_* functions for them, which then need libdevice.bc at compile
/// time. NVPTX lowers those LLVM intrinsics natively, so kiln keeps them and its PTX is
/// self-contained.
LogicalResult convertToNVVM(gpu::GPUModuleOp gm) {
  MLIRContext* ctx = gm.getContext();
  // The GPU patterns name NVVM attributes, so NVVM must be loaded before they are built
  // (a pass would declare it as a dependent dialect).
  ctx->loadDialect<NVVM::NVVMDialect, LLVM::LLVMDialect, nvgpu::NVGPUDialect, vector::VectorDialect>();
  LowerToLLVMOptions options(ctx, DataLayout(gm));
  options.overrideIndexBitwidth(64);
  LLVMTypeConverter converter(ctx, options);
  configureGpuToNVVMTypeConverter(converter);
  converter.addConversion([&](nvgpu::DeviceAsyncTokenType t) -> Type {
    return converter.convertType(IntegerType::get(t.getContext(), 32));
  });
  RewritePatternSet patterns(ctx);
  populateGpuToNVVMConversionPatterns(converter, patterns);
  populateNVGPUToNVVMConversionPatterns(converter, patterns);
  // kiln emits vector stores only where it has checked the vector alignment at run time.
  populateVectorToLLVMConversionPatterns(converter, patterns, /*reassociateFPReductions=*/false,
                                         /*force32BitVectorIndices=*/false, /*useVectorAlignment=*/true);
  arith::populateArithToLLVMConversionPatterns(converter, patterns);
  cf::populateControlFlowToLLVMConversionPatterns(converter, patterns);
  populateFinalizeMemRefToLLVMConversionPatterns(converter, patterns);
  populateMathToLLVMConversionPatterns(converter, patterns);
  LLVMConversionTarget target(*ctx);
  target.addLegalDialect<NVVM::NVVMDialect>();
  target.addIllegalDialect<gpu::GPUDialect, arith::ArithDialect, cf::ControlFlowDialect,
                           memref::MemRefDialect, math::MathDialect, nvgpu::NVGPUDialect,
                           vector::VectorDialect>();
  target.addLegalOp<gpu::GPUModuleOp, gpu::YieldOp>();
  return applyPartialConversion(gm, target, std::move(patterns));
}

/// Math as polynomials in arith ops (accurate to f32 rounding): no libdevice needed. The
/// index divisions (ceildiv & co.) as plain integer ops; not all of arith-expand, which
/// would also turn maximumf into two compares and two selects where sm_80+ has max.NaN.
struct ApproximateMath : PassWrapper<ApproximateMath, OperationPass<gpu::GPUModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ApproximateMath)
  StringRef getArgument() const override { return "kiln-approximate-math"; }
  void runOnOperation() override {
    gpu::GPUModuleOp gm = getOperation();
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns);
    arith::populateCeilFloorDivExpandOpsPatterns(patterns);
    if (failed(applyPatternsGreedily(gm, std::move(patterns)))) {
      gm.emitError("math approximation failed");
      return signalPassFailure();
    }
    // In the sm_90a twin's epilogue, an IEEE f32 division or square root becomes a call
    // to ptxas's slow-path subroutine, and any call in the function makes ptxas serialise
    // every wgmma (C7509). div.approx / sqrt.approx (2 ulp) keep the main loop asynchronous.
    for (auto f : gm.getOps<gpu::GPUFuncOp>())
      if (f->hasAttr(hopper::kLaunchPlanAttr)) {
        f.walk([](arith::DivFOp d) {
          d.setFastmath(d.getFastmath() | arith::FastMathFlags::arcp | arith::FastMathFlags::afn);
        });
        f.walk([](math::SqrtOp s) { s.setFastmath(s.getFastmath() | arith::FastMathFlags::afn); });
      }
  }
};

/// convertToNVVM as a pass over one gpu.module.
struct ConvertToNVVM : PassWrapper<ConvertToNVVM, OperationPass<gpu::GPUModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ConvertToNVVM)
  StringRef getArgument() const override { return "kiln-convert-to-nvvm"; }
  void getDependentDialects(DialectRegistry& registry) const override {
    registry.insert<NVVM::NVVMDialect, LLVM::LLVMDialect, nvgpu::NVGPUDialect, vector::VectorDialect>();
  }
  void runOnOperation() override {
    if (failed(convertToNVVM(getOperation()))) signalPassFailure();
  }
};

/// Records the sm_90a twin's launch plan (or why there is none) before lowering erases
/// the tile kernel.
void readSm90Plan(ModuleOp m, DeviceCode& out) {
  if (auto why = m->getAttrOfType<StringAttr>("kiln.sm90")) out.sm90_why_not = why.str();
  // Every module's (kiln-split-portable may have given twins modules of their own, in
  // order), in the order of the twins, which is the pass's (hopper::selectTwins'): the
  // order hopper::choose() breaks ties in, and the order of their modules.
  for (auto gm : m.getOps<gpu::GPUModuleOp>())
    for (auto f : gm.getOps<gpu::GPUFuncOp>())
      if (auto plan = f->getAttrOfType<StringAttr>(hopper::kLaunchPlanAttr))
        out.sm90.push_back(hopper::LaunchPlan::fromJson(nlohmann::json::parse(plan.str())));
}

/// A tensor map is a 128-byte kernel parameter read in place (`__grid_constant__`): TMA
/// needs its address, and a by-value parameter whose address is taken would otherwise be
/// copied to local memory. convert-gpu-to-nvvm cannot carry these attributes, so they are
/// set on the lowered function.
void markTensorMapParams(ModuleOp m, const DeviceCode& code) {
  for (const hopper::LaunchPlan& plan : code.sm90)
    for (auto gm : m.getOps<gpu::GPUModuleOp>())
      if (auto f = gm.lookupSymbol<LLVM::LLVMFuncOp>(plan.entry)) {
        Builder b(m.getContext());
        for (auto [i, p] : llvm::enumerate(plan.params)) {
          if (p.kind != hopper::LaunchParam::TensorMap) continue;
          f.setArgAttr(unsigned(i), LLVM::LLVMDialect::getByValAttrName(),
                       TypeAttr::get(LLVM::LLVMArrayType::get(b.getI64Type(), 16)));
          f.setArgAttr(unsigned(i), LLVM::LLVMDialect::getAlignAttrName(), b.getI64IntegerAttr(64));
          f.setArgAttr(unsigned(i), "nvvm.grid_constant", b.getUnitAttr());
        }
      }
}

void lowerToNVVM(ModuleOp m, const CompileOptions& o, DiagnosticCollector& diags, const std::string& name,
                 Stage stop, std::string* dump, DeviceCode& code) {
  {
    PassManager pm(m.getContext());
    if (cudaTarget(o.arch).wgmma && o.hopperGemm) {
      KilnLowerGemmSm90Options sm90;
      sm90.tileN = o.hopperTileN;
      sm90.tileM = o.hopperTileM;
      sm90.stages = o.hopperStages;
      sm90.cluster = o.hopperCluster; // 0: kiln's choice (the pass's)
      sm90.clusterM = o.hopperClusterM;
      sm90.decodeRows = o.hopperDecodeRows;
      sm90.wideRows = o.hopperWideRows;
      sm90.rasterGroup = o.hopperRaster ? o.hopperRaster : 8;
      pm.addPass(kiln::createKilnLowerGemmSm90(sm90));
      pm.addPass(kiln::createKilnLowerAttentionSm90());
    }
    KilnAssignLayoutsOptions layouts;
    layouts.numWarps = o.numWarps;
    pm.addPass(kiln::createKilnAssignLayouts(layouts));
    if (failed(pm.run(m)))
      diags.fail(ErrorKind::CompileFailed, "kernel '" + name + "': assigning layouts failed");
  }
  if (stop == Stage::layouts && dump) {
    *dump = detail::printOp(m);
    return;
  }
  {
    PassManager pm(m.getContext());
    KilnLowerToGPUOptions opts;
    opts.numWarps = o.numWarps;
    pm.addPass(kiln::createKilnLowerToGPU(opts));
    // Each kernel (the portable one, every twin) on a thread of its own: gpu.func is
    // isolated from above, and the module holds nothing else to simplify.
    OpPassManager& kernels = pm.nest<gpu::GPUModuleOp>().nest<gpu::GPUFuncOp>();
    kernels.addPass(detail::createCanonicalizer());
    kernels.addPass(createCSEPass());
    if (o.splitPortable) {
      KilnSplitPortableOptions split;
      split.twinModules = true; // LLVM makes each twin's PTX on a thread of its own
      pm.addPass(kiln::createKilnSplitPortable(split));
    }
    if (failed(pm.run(m)))
      diags.fail(ErrorKind::CompileFailed, "kernel '" + name + "': lowering to GPU kernels failed");
  }
  readSm90Plan(m, code);
  if ((stop == Stage::mlir || stop == Stage::layouts) && dump) {
    *dump = detail::printOp(m);
    return;
  }
  // From here on each gpu.module (a twin's, or the fallback's) on a thread of its own: the
  // steps below touch nothing outside the module they run on.
  PassManager pm(m.getContext());
  OpPassManager& modules = pm.nest<gpu::GPUModuleOp>();
  modules.addPass(std::make_unique<ApproximateMath>());
  modules.addPass(createSCFToControlFlowPass());
  modules.addPass(std::make_unique<ConvertToNVVM>());
  // NVVM ops with no LLVM intrinsic (wgmma.mma_async, mbarrier.try_wait.parity) become the
  // inline PTX upstream writes for them.
  modules.addPass(createConvertNVVMToLLVMPass());
  modules.addPass(createReconcileUnrealizedCastsPass());
  if (failed(pm.run(m)))
    diags.fail(ErrorKind::CompileFailed, "kernel '" + name + "': lowering to NVVM failed");
  markTensorMapParams(m, code);
}

/// One gpu.module's PTX (the NVVM target attached to it), or nothing (the diagnostics
/// say why). May run on its own thread while another module is serialised (the context
/// then multithreaded): it throws nothing and touches nothing but `gm`.
std::optional<std::string> toPtx(gpu::GPUModuleOp gm) {
  auto target = cast<gpu::TargetAttrInterface>(gm.getTargetsAttr()[0]);
  gpu::TargetOptions options({}, {}, {}, {}, gpu::CompilationTarget::Assembly);
  std::optional<SmallVector<char, 0>> object = target.serializeToObject(gm, options);
  if (!object) return std::nullopt;
  std::string ptx(object->begin(), object->end());
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return ptx;
}

} // namespace

DeviceCode compileToPtx(const Kernel& kernel, const CompileOptions& options, Stage stop, std::string* dump) {
  const std::string& arch = options.arch;
  const int numWarps = options.numWarps;
  checkArch(arch);
  const std::string broken = hopper::checkTwinOptions(
      {options.hopperTileM, options.hopperTileN, options.hopperStages, options.hopperCluster, options.hopperClusterM,
       options.hopperRaster},
      {"hopper_tile_m", "hopper_tile_n", "hopper_stages", "hopper_cluster", "hopper_cluster_m", "hopper_raster"});
  if (!broken.empty()) kiln::detail::throwError(ErrorKind::InvalidArgument, "kernel '" + kernel.name() + "': " + broken);
  const std::string& name = kernel.name();
  if (numWarps < 1 || numWarps > 32)
    kiln::detail::throwError(ErrorKind::InvalidArgument, "kernel '" + name + "': num_warps must be 1..32, got " +
                                                std::to_string(numWarps));
  DeviceCode out;
  out.name = name;
  out.arch = arch;
  out.threads = int64_t(numWarps) * 32;

  auto t0 = Clock::now();
  detail::NvtxRange phase("tile passes", name);
  auto priv = detail::privateCopy(kernel);
  ModuleOp m = *priv.module;
  detail::shareCompilerThreads(*m.getContext(), options.threads);
  DiagnosticCollector diags(m.getContext());
  detail::runTilePasses(m, diags, name);
  out.grid = gridPlan(m, name);
  out.times.tile_passes_ms = detail::msSince(t0);

  t0 = Clock::now();
  phase.next("lowering");
  lowerToNVVM(m, options, diags, name, stop, dump, out);
  out.times.lowering_ms = detail::msSince(t0);
  phase.next("codegen");
  if (stop == Stage::mlir || stop == Stage::layouts) return out;

  // The twins' and the kernel's module (kiln-split-portable may have moved the kernel to
  // one of its own, last, and each twin past the first to one of its own, between).
  auto gms = llvm::to_vector(m.getOps<gpu::GPUModuleOp>());
  for (auto gm : gms) {
    for (auto f : gm.getOps<LLVM::LLVMFuncOp>()) {
      if (f.getName() == name) {
        if (auto smem = f->getAttrOfType<IntegerAttr>("kiln.shared_bytes")) out.shared_bytes = smem.getInt();
        // Checked here, not at launch: a compile-only build for another machine must not ship
        // a kernel no GPU of its target can run.
        const int64_t limit = int64_t(cudaTarget(arch).sharedKiBPerCta) * 1024;
        if (out.shared_bytes > limit)
          kiln::detail::throwError(ErrorKind::Unsupported,
                      "kernel '" + name + "' needs " + std::to_string(out.shared_bytes) + " bytes of shared memory per CTA; " +
                          arch + " allows at most " + std::to_string(limit) +
                          " (smaller tiles or fewer pipeline stages need less)");
      } else if (f.isExternal() && f.getName().starts_with("__nv_")) {
        kiln::detail::throwError(ErrorKind::CompileFailed, "kernel '" + name + "': lowering left a call to libdevice's " +
                                                  f.getName().str() + "; kiln emits self-contained PTX");
      }
    }
  }

  if (stop == Stage::llvm) {
    llvm::LLVMContext llctx;
    auto llmod = translateModuleToLLVMIR(gms[0], llctx, name);
    if (!llmod) diags.fail(ErrorKind::CompileFailed, "kernel '" + name + "': LLVM IR translation failed");
    if (dump) {
      llvm::raw_string_ostream os(*dump);
      llmod->print(os, nullptr);
    }
    return out;
  }

  t0 = Clock::now();
  PassManager pm(m.getContext());
  GpuNVVMAttachTargetOptions target;
  target.chip = arch;
  target.features = cudaTarget(arch).ptxFeatures();
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));
  if (failed(pm.run(m)))
    diags.fail(ErrorKind::CompileFailed, "kernel '" + name + "': PTX generation for " + arch + " failed");
  std::shared_ptr<detail::PrivateModule> owner; // held here too until the twins' PTX is out
  if (gms.size() > 1) {
    // Several LLVM modules, several threads: the context must lock what it uniques (each
    // gpu.module is isolated from above, so nothing else is shared). The fallback's (last)
    // thread owns the MLIR module with this one, and past the return alone: the caller
    // loads the twins' PTX while the fallback's is made; the module goes when it is done.
    m.getContext()->enableMultithreading(true);
    owner = std::make_shared<detail::PrivateModule>(std::move(priv));
    out.portable_ptx = std::async(std::launch::async, [owner, portable = gms.back()]() mutable {
                         return toPtx(portable);
                       }).share();
  }
  // The twins' modules (or the one module; the fallback's, last, is its thread's),
  // options.threads at a time; every thread is joined before the module can go.
  std::vector<std::optional<std::string>> made(owner ? gms.size() - 1 : gms.size());
  detail::parallelFor(made.size(), options.threads, [&](size_t i) { made[i] = toPtx(gms[i]); });
  for (const std::optional<std::string>& ptx : made)
    if (!ptx) diags.fail(ErrorKind::CompileFailed, "kernel '" + name + "': PTX generation for " + arch + " failed");
  out.ptx = std::move(*made[0]);
  for (size_t i = 1; i < made.size(); ++i) out.more_ptx.push_back(std::move(*made[i]));
  out.times.codegen_ms = detail::msSince(t0);
  return out;
}

} // namespace kiln::cuda
