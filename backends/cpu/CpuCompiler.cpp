#include "CpuCompiler.h"
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
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
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
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>
#include <sstream>
#include <unistd.h>

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

void lowerToLoops(ModuleOp m, DiagnosticCollector& diags, const std::string& name) {
  PassManager pm(m.getContext());
  pm.addPass(kiln::createKilnLowerToLoops());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (failed(pm.run(m)))
    diags.fail(ErrorKind::CompileFailed, "kernel '" + name + "': lowering to loops failed");
}

void lowerToLLVMDialect(ModuleOp m, DiagnosticCollector& diags, const std::string& name) {
  PassManager pm(m.getContext());
  pm.addPass(createSCFToControlFlowPass());
  // bf16 <-> f32 as integer ops, before anything turns arith into LLVM (vector-to-llvm
  // converts arith too): inline code on every CPU instead of a helper call per element.
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(createConvertVectorToLLVMPass()); // the dot's row vectors
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  if (failed(pm.run(m)))
    diags.fail(ErrorKind::CompileFailed, "kernel '" + name + "': lowering to LLVM failed");
}

// The JIT'd object file (ExecutionEngine keeps it with enableObjectDump; it only writes it
// to a file, so it goes through a private temporary). Empty when that fails (a full disk
// included): the kernel then just is not cached.
std::string objectFile(ExecutionEngine& engine, const std::string& name) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const char* tmpdir = std::getenv("TMPDIR");
  std::string path = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/kiln-" + name + "-" +
                     std::to_string(::getpid()) + "-" + std::to_string(rng()) + ".o";
  try {
    engine.dumpToObjectFile(path);
  } catch (...) { // (no RTTI here: catching kiln::Error by type would copy its typeinfo in)
    // A full disk: LLVM's stream reports a fatal error (kiln's handler throws it) as it
    // closes. The kernel is compiled; it is only not cached. (LLVM, built without
    // exceptions, leaves that stream's descriptor open.)
    ::unlink(path.c_str());
    return {};
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  if (in) ss << in.rdbuf();
  ::unlink(path.c_str());
  return ss.str();
}

void registerTranslations(MLIRContext* ctx) {
  DialectRegistry reg;
  registerBuiltinDialectTranslation(reg);
  registerLLVMDialectTranslation(reg);
  ctx->appendDialectRegistry(reg);
}

class CpuKernel : public detail::CompiledImpl {
public:
  std::unique_ptr<ExecutionEngine> engine;
  std::unique_ptr<llvm::orc::LLJIT> jit; // a kernel loaded from the cache's object file
  std::shared_ptr<MLIRContext> ctx; // the private context the kernel was compiled in
  void (*fn)(void**) = nullptr;

  void launch(const std::vector<TensorView>& args, void*, bool) override {
    detail::checkLaunchArgs(sig, args);
    detail::PackedArgs packed = detail::packMemrefArgs(args);
    fn(packed.ptrs.data());
  }
};

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
    const std::string entry = meta.at("entry").get<std::string>();
    auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(target.builder()).create();
    if (!jit) kiln::detail::throwError(ErrorKind::Runtime, "cannot create a JIT: " + llvm::toString(jit.takeError()));
    llvm::orc::MangleAndInterner mangle((*jit)->getExecutionSession(), (*jit)->getDataLayout());
    if (auto err = (*jit)->getMainJITDylib().define(llvm::orc::absoluteSymbols(builtinSymbols(mangle))))
      kiln::detail::throwError(ErrorKind::Runtime, "cannot define kiln's conversion helpers: " + llvm::toString(std::move(err)));
    // libm and friends, as the ExecutionEngine resolves them for a fresh compile.
    auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess((*jit)->getDataLayout().getGlobalPrefix());
    if (!gen) kiln::detail::throwError(ErrorKind::Runtime, "cannot search the process's symbols: " + llvm::toString(gen.takeError()));
    (*jit)->getMainJITDylib().addGenerator(std::move(*gen));
    if (auto err = (*jit)->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(payload, sig.name + ".o")))
      kiln::detail::throwError(ErrorKind::InvalidArgument, "the cached object does not link: " + llvm::toString(std::move(err)));
    auto sym = (*jit)->lookup(entry);
    if (!sym) kiln::detail::throwError(ErrorKind::InvalidArgument, "the cached object has no '" + entry + "': " +
                                                          llvm::toString(sym.takeError()));
    auto out = std::make_unique<CpuKernel>();
    out->fn = sym->toPtr<void (*)(void**)>();
    out->jit = std::move(*jit);
    return out;
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
  auto out = std::make_unique<CpuKernel>();
  out->sig = kernel.signature();
  out->backend = Backend::cpu;

  auto t0 = Clock::now();
  auto priv = detail::privateCopy(kernel);
  out->ctx = priv.ctx;
  auto& m = priv.module;
  DiagnosticCollector diags(m->getContext());
  detail::runTilePasses(*m, diags, name);
  out->times.tile_passes_ms = detail::msSince(t0);

  t0 = Clock::now();
  lowerToLoops(*m, diags, name);
  lowerToLLVMDialect(*m, diags, name);
  out->times.lowering_ms = detail::msSince(t0);

  t0 = Clock::now();
  registerTranslations(m->getContext());
  auto transformer = makeOptimizingTransformer(/*optLevel=*/3, /*sizeLevel=*/0, tm.get());
  ExecutionEngineOptions opts;
  opts.transformer = transformer;
  opts.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  opts.enableGDBNotificationListener = false;
  opts.enablePerfNotificationListener = false;
  opts.enableObjectDump = true; // keeps the object file, for the kernel cache
  auto engine = ExecutionEngine::create(*m, opts, std::move(tm));
  if (!engine)
    diags.fail(ErrorKind::CompileFailed,
               "kernel '" + name + "': JIT failed: " + llvm::toString(engine.takeError()));
  out->engine = std::move(*engine);
  out->engine->registerSymbols(builtinSymbols);
  auto fn = out->engine->lookupPacked(name);
  if (!fn)
    diags.fail(ErrorKind::CompileFailed,
               "kernel '" + name + "': JIT'd code has no entry: " + llvm::toString(fn.takeError()));
  out->fn = *fn;
  out->binary = objectFile(*out->engine, name);
  out->cacheMeta = {{"entry", "_mlir_" + name}};
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
