#include "Compiler/KernelImpl.h"
#include "Runtime/KernelCache.h"
#include "Runtime/Throw.h"
#include "Dialect/Tile/TileDialect.h"

#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseSet.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln {

static DType toDType(mlir::Type t) {
  if (t.isBF16()) return DType::bf16;
  if (t.isF16()) return DType::f16;
  if (t.isInteger(32)) return DType::i32;
  return DType::f32;
}

std::string ArgSpec::str() const {
  std::string s = std::string(output ? "out " : "in ") + name + ": " + to_string(dtype) + "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + dims[i].str();
  return s + "]";
}

std::string KernelSignature::str() const {
  std::string s = name + "(";
  for (size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + args[i].str();
  return s + ")";
}

Kernel::Kernel(std::shared_ptr<const detail::KernelImpl> impl) : impl_(std::move(impl)) {}
const std::string& Kernel::name() const { return impl_->sig.name; }
const KernelSignature& Kernel::signature() const { return impl_->sig; }

std::string Kernel::tile_ir() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->module.get().print(os);
  return s;
}

namespace detail {
const std::string& tileIrDigest(const Kernel& kernel) {
  const KernelImpl& impl = kernel.impl();
  std::call_once(impl.digestOnce, [&] { impl.digest = sha256Hex(kernel.tile_ir()); });
  return impl.digest;
}
} // namespace detail

Kernel Kernel::from_tile_ir(const std::string& text, const std::string& kernel_name) {
  auto impl = std::make_shared<detail::KernelImpl>();
  impl->ctx = detail::makeContext();
  detail::DiagnosticCollector diags(impl->ctx.get());
  impl->module = mlir::parseSourceString<mlir::ModuleOp>(text, impl->ctx.get());
  if (!impl->module) diags.fail(ErrorKind::InvalidKernel, "tile IR does not parse");
  auto kernels = llvm::to_vector(impl->module->getOps<tile::KernelOp>());
  if (!kernel_name.empty()) {
    llvm::erase_if(kernels, [&](tile::KernelOp k) { return k.getSymName() != kernel_name; });
    // Keep only the requested kernel so the module holds exactly one.
    for (auto k : llvm::to_vector(impl->module->getOps<tile::KernelOp>()))
      if (k.getSymName() != kernel_name) k.erase();
  }
  if (kernels.size() != 1)
    kiln::detail::throwError(ErrorKind::InvalidKernel,
                "tile IR must hold exactly one tile.kernel" +
                    (kernel_name.empty() ? std::string() : " named '" + kernel_name + "'") +
                    ", found " + std::to_string(kernels.size()));
  impl->sig = detail::readSignature(*impl->module);
  if (auto bad = detail::inPlaceOverDotInput(impl->sig))
    kiln::detail::throwError(ErrorKind::InvalidKernel, "kernel '" + impl->sig.name + "': " + *bad);
  return Kernel(std::move(impl));
}

namespace detail {

PrivateModule privateCopy(const Kernel& kernel) {
  std::string text;
  {
    llvm::raw_string_ostream os(text);
    std::lock_guard<std::mutex> lock(kernel.impl().mu);
    kernel.impl().module.get().print(os, mlir::OpPrintingFlags().enableDebugInfo());
  }
  PrivateModule p;
  p.ctx = makeContext();
  DiagnosticCollector diags(p.ctx.get());
  p.module = mlir::parseSourceString<mlir::ModuleOp>(text, p.ctx.get());
  if (!p.module)
    diags.fail(ErrorKind::CompileFailed, "kernel '" + kernel.name() + "': re-reading its tile IR failed");
  return p;
}

std::string inPlaceOverDotError(const std::string& output, const std::string& input) {
  // A dot reads each input element from many programs: in place it would read sums
  // already written over it.
  return "output '" + output + "' cannot be written in place over '" + input + "': a tile.dot reads '" + input +
         "' (allow_in_place)";
}

std::optional<std::string> inPlaceOverDotInput(const KernelSignature& sig) {
  for (const ArgSpec& out : sig.args)
    for (const std::string& name : out.in_place_over)
      for (const ArgSpec& in : sig.args)
        if (in.name == name && in.contracted) return inPlaceOverDotError(out.name, in.name);
  return std::nullopt;
}

KernelSignature readSignature(mlir::ModuleOp module) {
  auto k = *module.getOps<tile::KernelOp>().begin();
  KernelSignature sig;
  sig.name = k.getSymName().str();
  for (unsigned i = 0; i < k.getNumArguments(); ++i) {
    auto t = k.getArgType(i);
    ArgSpec a;
    a.name = k.getArgName(i).str();
    a.dtype = toDType(t.getElementType());
    a.output = k.isOutput(i);
    for (unsigned d = 0; d < t.getRank(); ++d)
      a.dims.push_back(DimSpec{t.getDimSymbol(d).str(), t.getDimConstant(d)});
    sig.args.push_back(std::move(a));
  }
  // The arguments a dot reads: forward from each load of an argument through every value
  // derived from it — elementwise ops, a loop's carried values and results — to a dot's
  // lhs or rhs. (An accumulator's inputs are not read by other programs.)
  auto reachesDot = [](mlir::Value start) {
    llvm::SmallVector<mlir::Value> work{start};
    llvm::DenseSet<mlir::Value> seen;
    while (!work.empty()) {
      mlir::Value v = work.pop_back_val();
      if (!seen.insert(v).second) continue;
      for (mlir::OpOperand& use : v.getUses()) {
        mlir::Operation* user = use.getOwner();
        const unsigned n = use.getOperandNumber();
        if (mlir::isa<tile::DotOp>(user) && n < 2) return true; // lhs or rhs
        if (auto loop = mlir::dyn_cast<tile::LoopOp>(user)) {
          if (n == 0) continue; // the trip count
          work.push_back(loop.getCarried()[n - 1]);
          work.push_back(loop.getResult(n - 1));
          continue;
        }
        if (mlir::isa<tile::YieldOp>(user)) {
          if (auto loop = mlir::dyn_cast<tile::LoopOp>(user->getParentOp())) {
            work.push_back(loop.getCarried()[n]);
            work.push_back(loop.getResult(n));
          }
          continue;
        }
        llvm::append_range(work, user->getResults());
      }
    }
    return false;
  };
  k.walk([&](tile::LoadOp load) {
    if (auto view = load.getView().getDefiningOp<tile::ViewOp>())
      if (auto arg = mlir::dyn_cast<mlir::BlockArgument>(view.getTensor()))
        if (!sig.args[arg.getArgNumber()].contracted && reachesDot(load.getResult()))
          sig.args[arg.getArgNumber()].contracted = true;
  });
  if (auto pairs = k.getInPlace())
    for (size_t p = 0; p + 1 < pairs->size(); p += 2)
      sig.args[(*pairs)[p]].in_place_over.push_back(sig.args[(*pairs)[p + 1]].name);
  return sig;
}

} // namespace detail
} // namespace kiln
