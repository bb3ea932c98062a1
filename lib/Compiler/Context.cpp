#include "Compiler/KernelImpl.h"
#include "Dialect/Tile/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln::detail {

std::shared_ptr<mlir::MLIRContext> makeContext() {
  mlir::DialectRegistry registry;
  registry.insert<tile::TileDialect, mlir::arith::ArithDialect, mlir::func::FuncDialect,
                  mlir::scf::SCFDialect, mlir::memref::MemRefDialect, mlir::math::MathDialect,
                  mlir::cf::ControlFlowDialect, mlir::LLVM::LLVMDialect>();
  auto ctx = std::make_shared<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx->loadDialect<tile::TileDialect, mlir::arith::ArithDialect>();
  return ctx;
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
  throw Error(kind, diag.empty() ? what : what + ":\n" + diag);
}

double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace kiln::detail
