#include "kiln/runtime.hpp"

#include "CpuCompiler.h"
#include "Compiler/KernelImpl.h"

namespace kiln {

const char* to_string(Backend b) {
  switch (b) {
  case Backend::automatic: return "auto";
  case Backend::cpu: return "cpu";
  case Backend::cuda: return "cuda";
  }
  return "?";
}

Backend parse_backend(const std::string& name) {
  if (name == "auto") return Backend::automatic;
  if (name == "cpu") return Backend::cpu;
  if (name == "cuda") return Backend::cuda;
  throw Error(ErrorKind::NotFound, "unknown backend '" + name + "' (expected auto, cpu or cuda)");
}

Stage parse_stage(const std::string& name) {
  if (name == "tile") return Stage::tile;
  if (name == "mlir") return Stage::mlir;
  if (name == "llvm") return Stage::llvm;
  throw Error(ErrorKind::NotFound,
              "unknown stage '" + name + "' (expected tile, mlir or llvm; ptx and cubin come "
              "with the CUDA backend)");
}

// The CUDA backend lands with issue 3; until then asking for it is an honest error and
// `auto` falls back to the CPU, saying so.
static const char* kNoCuda = "cuda: not built into this version of kiln";

Runtime Runtime::create(Backend backend) {
  if (backend == Backend::cuda)
    throw Error(ErrorKind::Unsupported, std::string("backend 'cuda' is unavailable (") + kNoCuda +
                                            "); use --backend=cpu or auto");
  return Runtime(Backend::cpu, cpu::describeHost() + "; " + kNoCuda);
}

CompiledKernel Runtime::compile(const Kernel& kernel) const {
  return CompiledKernel(cpu::compile(kernel));
}

std::string Runtime::emit(const Kernel& kernel, Stage stage) const { return cpu::emit(kernel, stage); }

CompiledKernel::CompiledKernel(std::unique_ptr<detail::CompiledImpl> impl) : impl_(std::move(impl)) {}
CompiledKernel::CompiledKernel(CompiledKernel&&) noexcept = default;
CompiledKernel& CompiledKernel::operator=(CompiledKernel&&) noexcept = default;
CompiledKernel::~CompiledKernel() = default;
const KernelSignature& CompiledKernel::signature() const { return impl_->sig; }
Backend CompiledKernel::backend() const { return impl_->backend; }
const CompileTimes& CompiledKernel::times() const { return impl_->times; }
void CompiledKernel::launch(const std::vector<TensorView>& args) const { impl_->launch(args); }

} // namespace kiln
