#pragma once
// Internal: what a kiln::Kernel holds, and the compiled-kernel interface backends
// implement. MLIR types live here, never in include/kiln.
#include <optional>
#include <functional>
#include <map>
#include <mutex>
#include <memory>
#include <string>

#include "kiln/error.hpp"
#include "kiln/kernel.hpp"
#include "kiln/runtime.hpp"
#include "Runtime/RuntimeImpl.h"
#include <chrono>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

namespace kiln::detail {

/// A context with every dialect kiln's pipelines use loaded, threading off: a compile
/// that has work for several threads lends it a shared pool (shareCompilerThreads).
std::shared_ptr<mlir::MLIRContext> makeContext();

/// Lets the pass manager run `ctx`'s nested passes (each gpu.module, each gpu.func of a
/// kernel's twins) on up to `threads` threads (0: one per core) of a pool shared by every
/// compile that asks for as many (MLIR's way for a context per compile). `ctx` must be
/// fresh from makeContext (threading off); with 1 it stays so.
void shareCompilerThreads(mlir::MLIRContext& ctx, int threads);

struct KernelImpl {
  std::shared_ptr<mlir::MLIRContext> ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  KernelSignature sig;
  /// Guards `ctx`: a Kernel is shared and may be compiled from several threads at once.
  mutable std::mutex mu;
  /// The tile IR's SHA-256, computed at the first compile (tileIrDigest): the IR never
  /// changes after tracing, so a Kernel compiled again is not printed and hashed again.
  mutable std::once_flag digestOnce;
  mutable std::string digest;
};

/// The kernel's tile IR in a fresh context of its own (locations kept), so a compile
/// never touches the shared Kernel and compiles of one Kernel can run in parallel.
struct PrivateModule {
  std::shared_ptr<mlir::MLIRContext> ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};
PrivateModule privateCopy(const Kernel& kernel);

/// Reads a kernel's signature from its tile.kernel op (the only kernel in `module`).
KernelSignature readSignature(mlir::ModuleOp module);
/// Why the signature's in-place declarations are unsound (an output over an input a dot
/// reads), or nothing.
std::optional<std::string> inPlaceOverDotInput(const KernelSignature& sig);
/// The message for one such pair.
std::string inPlaceOverDotError(const std::string& output, const std::string& input);

/// Collects MLIR diagnostics emitted while alive, so failures become kiln::Errors with
/// the IR location and message instead of text on stderr.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(mlir::MLIRContext* ctx);
  ~DiagnosticCollector();
  std::string take(); ///< all messages so far, one per line, with locations
  [[noreturn]] void fail(ErrorKind kind, const std::string& what);

private:
  mlir::MLIRContext* ctx_;
  uint64_t id_;
  std::string messages_;
};

} // namespace kiln::detail
