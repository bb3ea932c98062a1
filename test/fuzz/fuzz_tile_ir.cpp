// libFuzzer: tile IR text, as kiln-opt and lit read it. kiln's dialect (its types, custom
// op syntax and verifiers, compiled in here with the sanitizers) must refuse malformed
// text with a diagnostic, never crash; and whatever parses and verifies must print and
// parse back, verified, to the same text (the round trip lit relies on).
#include <cstddef>
#include <cstdint>
#include <string>

#include "Dialect/Tile/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

namespace {
std::string print(mlir::ModuleOp m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  m->print(os);
  return s;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static mlir::MLIRContext* ctx = [] {
    auto* c = new mlir::MLIRContext(mlir::MLIRContext::Threading::DISABLED);
    c->loadDialect<kiln::tile::TileDialect, mlir::arith::ArithDialect>();
    c->allowUnregisteredDialects(false);
    return c;
  }();
  mlir::ScopedDiagnosticHandler quiet(ctx, [](mlir::Diagnostic&) { return mlir::success(); });
  const std::string text(reinterpret_cast<const char*>(data), size);
  mlir::OwningOpRef<mlir::ModuleOp> m = mlir::parseSourceString<mlir::ModuleOp>(text, ctx);
  if (!m || mlir::failed(mlir::verify(*m))) return 0;
  const std::string once = print(*m);
  mlir::OwningOpRef<mlir::ModuleOp> again = mlir::parseSourceString<mlir::ModuleOp>(once, ctx);
  if (!again || mlir::failed(mlir::verify(*again)) || print(*again) != once) __builtin_trap(); // no round trip
  return 0;
}
