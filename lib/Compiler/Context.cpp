#include "Compiler/KernelImpl.h"
#include "Runtime/Throw.h"
#include "Compiler/LlvmErrors.h"
#include "Dialect/Tile/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <mutex>

namespace kiln::detail {

std::shared_ptr<mlir::MLIRContext> makeContext() {
  installLlvmErrorHandlers(); // before anything of LLVM can fail
  mlir::DialectRegistry registry;
  registry.insert<tile::TileDialect, mlir::arith::ArithDialect, mlir::func::FuncDialect,
                  mlir::scf::SCFDialect, mlir::memref::MemRefDialect, mlir::math::MathDialect,
                  mlir::cf::ControlFlowDialect, mlir::LLVM::LLVMDialect, mlir::gpu::GPUDialect,
                  mlir::NVVM::NVVMDialect, mlir::nvgpu::NVGPUDialect,
                  mlir::vector::VectorDialect>();
  // The CUDA path: conversions to LLVM that convert-gpu-to-nvvm pulls from each dialect,
  // the NVVM target (PTX), and translation to LLVM IR. Registered only, loaded on use.
  mlir::arith::registerConvertArithToLLVMInterface(registry);
  mlir::cf::registerConvertControlFlowToLLVMInterface(registry);
  mlir::registerConvertMemRefToLLVMInterface(registry);
  mlir::registerConvertMathToLLVMInterface(registry);
  mlir::NVVM::registerConvertGpuToNVVMInterface(registry);
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::registerNVVMDialectTranslation(registry);
  mlir::registerGPUDialectTranslation(registry);
  auto ctx = std::make_shared<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx->loadDialect<tile::TileDialect, mlir::arith::ArithDialect>();
  return ctx;
}

void shareCompilerThreads(mlir::MLIRContext& ctx, int threads) {
  const unsigned n = threads > 0 ? unsigned(threads) : llvm::hardware_concurrency().compute_thread_count();
  if (n <= 1) return;
  // One pool per size asked for, made at first use, its threads started as work comes; the
  // pools go at exit, idle (a compile holds its runtime, which the engine destroys first).
  static std::mutex mu;
  static std::map<unsigned, std::unique_ptr<llvm::DefaultThreadPool>> pools;
  llvm::ThreadPoolInterface* pool;
  {
    std::lock_guard<std::mutex> lock(mu);
    std::unique_ptr<llvm::DefaultThreadPool>& p = pools[n];
    if (!p) p = std::make_unique<llvm::DefaultThreadPool>(llvm::hardware_concurrency(n));
    pool = p.get();
  }
  ctx.setThreadPool(*pool);
}

DiagnosticCollector::DiagnosticCollector(mlir::MLIRContext* ctx) : ctx_(ctx) {
  id_ = ctx->getDiagEngine().registerHandler([this](mlir::Diagnostic& d) {
    llvm::raw_string_ostream os(messages_);
    if (!messages_.empty()) os << "\n";
    os << d.getLocation() << ": " << d;
    for (auto& note : d.getNotes()) os << "\n  note: " << note.getLocation() << ": " << note;
    return mlir::success();
  });
}

DiagnosticCollector::~DiagnosticCollector() { ctx_->getDiagEngine().eraseHandler(id_); }

std::string DiagnosticCollector::take() {
  std::string out;
  std::swap(out, messages_);
  return out;
}

void DiagnosticCollector::fail(ErrorKind kind, const std::string& what) {
  std::string diag = take();
  throwError(kind, diag.empty() ? what : what + ":\n" + diag);
}

} // namespace kiln::detail
