#include "CpuCompiler.h"
#include "Runtime/Nvtx.h"
#include "Runtime/Throw.h"
#include "CpuTarget.h"
#include "FloatBuiltins.h"
#include "Compiler/Pipeline.h"

#include "Dialect/Tile/TileDialect.h"
#include "Transforms/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "mlir/Dialect/Vector/Transforms/LoweringPatterns.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

#include <cstring>
#include <thread>

namespace kiln::cpu {

using namespace mlir;
using detail::DiagnosticCollector;
using Clock = std::chrono::steady_clock;

namespace {

/// The conversion helpers LLVM may call (FloatBuiltins.h), as JIT symbols.
llvm::orc::SymbolMap builtinSymbols(llvm::orc::MangleAndInterner mangle) {
  llvm::orc::SymbolMap map;
  for (auto& [name, addr] : floatBuiltins())
    map[mangle(name)] = {llvm::orc::ExecutorAddr::fromPtr(addr), llvm::JITSymbolFlags::Exported};
  return map;
}

/// kiln-lower-to-loops' vector ops (the dot's rows: 1-D load, broadcast, fma, store) into
/// LLVM. Upstream's convert-vector-to-llvm would do it too, but it loads the tensor dialect
/// and, through it, affine and complex, and links the Arm and x86 vector dialects: 1.4 MB
/// of the library for ops kiln never makes.
struct ConvertVectorToLLVM : PassWrapper<ConvertVectorToLLVM, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ConvertVectorToLLVM)
  StringRef getArgument() const override { return "kiln-cpu-vector-to-llvm"; }
  void getDependentDialects(DialectRegistry& registry) const override { registry.insert<LLVM::LLVMDialect>(); }
  void runOnOperation() override {
    MLIRContext* ctx = &getContext();
    {
      RewritePatternSet lowering(ctx);
      vector::populateVectorBroadcastLoweringPatterns(lowering);
      vector::populateVectorRankReducingFMAPattern(lowering);
      (void)applyPatternsGreedily(getOperation(), std::move(lowering));
    }
    LLVMTypeConverter converter(ctx, LowerToLLVMOptions(ctx));
    RewritePatternSet patterns(ctx);
    populateVectorToLLVMConversionPatterns(converter, patterns, /*reassociateFPReductions=*/false,
                                           /*force32BitVectorIndices=*/true); // upstream pass's default
    LLVMConversionTarget target(*ctx);
    target.addLegalDialect<arith::ArithDialect, memref::MemRefDialect>();
    target.addIllegalDialect<vector::VectorDialect>(); // a vector op it cannot lower is named, here
    target.addLegalOp<UnrealizedConversionCastOp>();
    if (failed(applyPartialConversion(getOperation(), target, std::move(patterns)))) signalPassFailure();
  }
};

void lowerToLoops(ModuleOp m, DiagnosticCollector& diags, const std::string& name) {
  PassManager pm(m.getContext());
  pm.addPass(kiln::createKilnLowerToLoops());
  pm.addPass(detail::createCanonicalizer());
  pm.addPass(createCSEPass());
  if (failed(pm.run(m)))
    diags.fail(ErrorKind::CompileFailed, "kernel '" + name + "': lowering to loops failed");
}

void lowerToLLVMDialect(ModuleOp m, DiagnosticCollector& diags, const std::string& name) {
  // kiln.no_unroll (kiln-lower-to-loops) becomes LLVM loop metadata: scf-to-cf carries an
  // `llvm.loop_annotation` from the scf.for to its back edge; the llvm.br takes it as its own
  // attribute below.
  m.getContext()->getOrLoadDialect<LLVM::LLVMDialect>(); // its attributes, before the passes load it
  auto noUnroll = LLVM::LoopAnnotationAttr::get(
      m.getContext(), {}, {}, {}, LLVM::LoopUnrollAttr::get(m.getContext(), BoolAttr::get(m.getContext(), true), {}, {}, {}, {}, {}, {}),
      {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {});
  m.walk([&](scf::ForOp f) {
    if (f->removeAttr(kiln::kNoUnrollAttr)) f->setAttr("llvm.loop_annotation", noUnroll);
  });
  PassManager pm(m.getContext());
  pm.addPass(createSCFToControlFlowPass());
  // bf16 <-> f32 as integer ops, before anything turns arith into LLVM: inline code on
  // every CPU instead of a helper call per element.
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(std::make_unique<ConvertVectorToLLVM>()); // the dot's row vectors
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  if (failed(pm.run(m)))
    diags.fail(ErrorKind::CompileFailed, "kernel '" + name + "': lowering to LLVM failed");
  m.walk([](LLVM::BrOp br) {
    if (auto a = br->getAttrOfType<LLVM::LoopAnnotationAttr>("llvm.loop_annotation")) {
      br.setLoopAnnotationAttr(a);
      br->removeAttr("llvm.loop_annotation");
    }
  });
}

// The kernel's packed entry `_mlir_<name>(void** args)`: args[i] points at the i-th
// parameter of the lowered function (a memref is already expanded into its scalars, as
// detail::PackedArgs lays them out). Kernels return nothing.
void addPackedEntry(llvm::Module& mod, const std::string& name, DiagnosticCollector& diags) {
  llvm::Function* kernel = mod.getFunction(name);
  if (!kernel || kernel->isDeclaration() || !kernel->getReturnType()->isVoidTy())
    diags.fail(ErrorKind::CompileFailed, "kernel '" + name + "': the LLVM module has no void function '" + name + "'");
  llvm::LLVMContext& ctx = mod.getContext();
  llvm::IRBuilder<> b(ctx);
  auto* type = llvm::FunctionType::get(b.getVoidTy(), {b.getPtrTy()}, /*isVarArg=*/false);
  auto* entry = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, "_mlir_" + name, mod);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", entry));
  llvm::SmallVector<llvm::Value*> params;
  for (llvm::Argument& param : kernel->args()) {
    llvm::Value* slot = b.CreateConstGEP1_64(b.getPtrTy(), entry->getArg(0), param.getArgNo());
    params.push_back(b.CreateLoad(param.getType(), b.CreateLoad(b.getPtrTy(), slot)));
  }
  b.CreateCall(kernel, params);
  b.CreateRetVoid();
}

// Optimised machine code for `tm`, as an object file in memory. Codegen goes straight to a
// buffer: nothing touches the disk, and no LLVM file stream installs signal handlers or
// swaps the alternate signal stack in the engine's process, as a file written by LLVM would.
std::string emitObject(llvm::Module& mod, llvm::TargetMachine& tm, const std::string& name, DiagnosticCollector& diags) {
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile))
    diags.fail(ErrorKind::CompileFailed, "kernel '" + name + "': LLVM cannot emit an object file for " +
                                             tm.getTargetTriple().str());
  pm.run(mod);
  return std::string(buffer.begin(), buffer.end());
}

void registerTranslations(MLIRContext* ctx) {
  DialectRegistry reg;
  registerBuiltinDialectTranslation(reg);
  registerLLVMDialectTranslation(reg);
  ctx->appendDialectRegistry(reg);
}

class CpuKernel : public detail::CompiledImpl {
public:
  std::unique_ptr<llvm::orc::LLJIT> jit; // holds the kernel's code
  void (*fn)(void**) = nullptr;

  void launch(const std::vector<TensorView>& args, void*, bool) override {
    detail::checkLaunchArgs(sig, args);
    detail::PackedArgs packed(args);
    fn(packed.ptrs.data());
  }
};

// A kernel from its object file (a fresh compile's or the cache's): linked into a JIT of
// its own, with kiln's conversion helpers and the process's symbols (libm) to resolve.
// `what` says where the object came from, for errors.
std::unique_ptr<CpuKernel> loadObject(const CpuTarget& target, const std::string& object, const std::string& entry,
                                      const std::string& name, ErrorKind kind, const std::string& what) {
  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(target.builder()).create();
  if (!jit) kiln::detail::throwError(ErrorKind::Runtime, "cannot create a JIT: " + llvm::toString(jit.takeError()));
  llvm::orc::MangleAndInterner mangle((*jit)->getExecutionSession(), (*jit)->getDataLayout());
  if (auto err = (*jit)->getMainJITDylib().define(llvm::orc::absoluteSymbols(builtinSymbols(mangle))))
    kiln::detail::throwError(ErrorKind::Runtime, "cannot define kiln's conversion helpers: " + llvm::toString(std::move(err)));
  auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess((*jit)->getDataLayout().getGlobalPrefix());
  if (!gen) kiln::detail::throwError(ErrorKind::Runtime, "cannot search the process's symbols: " + llvm::toString(gen.takeError()));
  (*jit)->getMainJITDylib().addGenerator(std::move(*gen));
  if (auto err = (*jit)->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(object, name + ".o")))
    kiln::detail::throwError(kind, what + " does not link: " + llvm::toString(std::move(err)));
  auto sym = (*jit)->lookup(entry);
  if (!sym) kiln::detail::throwError(kind, what + " has no '" + entry + "': " + llvm::toString(sym.takeError()));
  auto out = std::make_unique<CpuKernel>();
  out->fn = sym->toPtr<void (*)(void**)>();
  out->jit = std::move(*jit);
  return out;
}

/// Host memory standing in for device memory, so one program runs on either backend.
struct HostDeviceTensor : detail::DeviceTensorImpl {
  HostTensor host;
};

class CpuRuntime : public detail::RuntimeImpl {
public:
  explicit CpuRuntime(CpuTarget t) : target(std::move(t)) {}
  const CpuTarget target;

  std::unique_ptr<detail::CompiledImpl> compile(const Kernel& k) override { return cpu::compile(k, target); }
  std::string emit(const Kernel& k, Stage stage) override { return cpu::emit(k, stage); }

  Fingerprint fingerprint() override {
    Fingerprint f;
    f.backend = "cpu";
    f.device = describe(target);
    f.target = target.cpu;
    f.sm_count = int(std::thread::hardware_concurrency());
    f.compiler = "LLVM ORC JIT";
    return f;
  }

  nlohmann::json cacheKeyInputs() override {
    // The object is compiled for this CPU: its name and features decide the code.
    return {{"backend", "cpu"}, {"triple", target.triple}, {"cpu", target.cpu}, {"features", target.features}};
  }

  std::unique_ptr<detail::CompiledImpl> loadCached(const KernelSignature& sig, const std::string& payload,
                                                   const nlohmann::json& meta) override {
    return loadObject(target, payload, meta.at("entry").get<std::string>(), sig.name, ErrorKind::InvalidArgument,
                      "the cached object");
  }
  std::unique_ptr<detail::DeviceTensorImpl> allocate(DType dt, const std::vector<int64_t>& dims) override {
    auto t = std::make_unique<HostDeviceTensor>();
    t->host = HostTensor(dt, dims);
    t->view = t->host.view();
    return t;
  }
  void upload(const HostTensor& from, detail::DeviceTensorImpl& to) override {
    auto& t = static_cast<HostDeviceTensor&>(to);
    std::memcpy(t.host.data(), from.data(), from.numel() * size_of(from.dtype()));
  }
  void download(const detail::DeviceTensorImpl& from, HostTensor& to) override {
    auto& t = static_cast<const HostDeviceTensor&>(from);
    std::memcpy(to.data(), t.host.data(), to.numel() * size_of(to.dtype()));
  }
  void synchronize() override {}
  std::vector<double> time(const std::function<void()>& run, int reps, int warmup, bool flushCache) override {
    // Writing 64 MiB evicts the inputs from any host last-level cache.
    std::vector<char> flush(flushCache ? size_t(64) << 20 : 0);
    for (int i = 0; i < warmup; ++i) run();
    std::vector<double> ms;
    for (int i = 0; i < reps; ++i) {
      if (flushCache) std::memset(flush.data(), i, flush.size());
      auto t0 = std::chrono::steady_clock::now();
      run();
      ms.push_back(detail::msSince(t0));
    }
    return ms;
  }
};

} // namespace

std::string describe(const CpuTarget& target) { return "cpu (" + target.describe() + " JIT)"; }

std::string emit(const Kernel& kernel, Stage stage) {
  if (stage == Stage::tile) return kernel.tile_ir();
  if (stage == Stage::ptx || stage == Stage::cubin || stage == Stage::layouts)
    kiln::detail::throwError(ErrorKind::Unsupported, "kernel '" + kernel.name() + "': layouts, ptx and cubin are CUDA "
                                        "stages; use --backend=cuda (it compiles without a GPU)");
  auto priv = detail::privateCopy(kernel);
  auto& m = priv.module;
  DiagnosticCollector diags(m->getContext());
  detail::runTilePasses(*m, diags, kernel.name());
  lowerToLoops(*m, diags, kernel.name());
  if (stage == Stage::mlir) return detail::printOp(*m);
  lowerToLLVMDialect(*m, diags, kernel.name());
  registerTranslations(m->getContext());
  llvm::LLVMContext llctx;
  auto llmod = translateModuleToLLVMIR(*m, llctx, kernel.name());
  if (!llmod) diags.fail(ErrorKind::CompileFailed, "kernel '" + kernel.name() + "': LLVM IR translation failed");
  std::string s;
  llvm::raw_string_ostream os(s);
  llmod->print(os, nullptr);
  return s;
}

std::unique_ptr<detail::CompiledImpl> compile(const Kernel& kernel, const CpuTarget& target) {
  const std::string& name = kernel.name();
  auto tm = target.machine();

  auto t0 = Clock::now();
  detail::NvtxRange phase("tile passes", name);
  auto priv = detail::privateCopy(kernel);
  auto& m = priv.module;
  DiagnosticCollector diags(m->getContext());
  detail::runTilePasses(*m, diags, name);
  const double tilePassesMs = detail::msSince(t0);

  t0 = Clock::now();
  phase.next("lowering");
  lowerToLoops(*m, diags, name);
  lowerToLLVMDialect(*m, diags, name);
  const double loweringMs = detail::msSince(t0);

  t0 = Clock::now();
  phase.next("codegen");
  registerTranslations(m->getContext());
  llvm::LLVMContext llctx;
  auto llmod = translateModuleToLLVMIR(*m, llctx, name);
  if (!llmod) diags.fail(ErrorKind::CompileFailed, "kernel '" + name + "': LLVM IR translation failed");
  llmod->setTargetTriple(tm->getTargetTriple());
  llmod->setDataLayout(tm->createDataLayout());
  addPackedEntry(*llmod, name, diags);
  // O2, not O3: O3's full unrolling of a tile's static loops around math calls made compile
  // time grow without bound (a 16x64 tile program with tanh, sigmoid and row maxima: 4.2 s
  // at O3, 0.32 s at O2) and the kernels ran no faster (docs/cpu.md).
  if (auto err = makeOptimizingTransformer(/*optLevel=*/2, /*sizeLevel=*/0, tm.get())(llmod.get()))
    diags.fail(ErrorKind::CompileFailed, "kernel '" + name + "': LLVM optimisation failed: " + llvm::toString(std::move(err)));
  const std::string object = emitObject(*llmod, *tm, name, diags);
  const std::string entry = "_mlir_" + name;
  auto out = loadObject(target, object, entry, name, ErrorKind::CompileFailed, "kernel '" + name + "': its object");
  out->sig = kernel.signature();
  out->backend = Backend::cpu;
  out->times.tile_passes_ms = tilePassesMs;
  out->times.lowering_ms = loweringMs;
  out->binary = object;
  out->cacheMeta = {{"entry", entry}};
  out->times.codegen_ms = detail::msSince(t0);
  out->report.target = describe(target);
  out->report.compiler = "LLVM ORC JIT";
  return out;
}

} // namespace kiln::cpu

namespace kiln::detail {
std::shared_ptr<RuntimeImpl> makeCpuRuntime(const RuntimeOptions& options, const std::string& why_not_cuda) {
  auto rt = std::make_shared<cpu::CpuRuntime>(cpu::chooseTarget(options.cpu));
  rt->backend = Backend::cpu;
  rt->description = cpu::describe(rt->target) + (why_not_cuda.empty() ? "" : "; " + why_not_cuda);
  return rt;
}
} // namespace kiln::detail
