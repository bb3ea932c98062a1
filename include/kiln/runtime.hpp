#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kiln/export.hpp"
#include "kiln/kernel.hpp"
#include "kiln/tensor.hpp"

namespace kiln {

enum class Backend { automatic, cpu, cuda };
KILN_API const char* to_string(Backend b);
/// "auto", "cpu", "cuda" -> Backend; throws kiln::Error(NotFound) otherwise.
KILN_API Backend parse_backend(const std::string& name);

/// A stage of the compile pipeline whose IR can be printed.
enum class Stage {
  tile, ///< tile IR as traced from the DSL
  mlir, ///< after kiln's tile passes and the backend's lowering to upstream dialects
  llvm, ///< LLVM IR handed to code generation
};
KILN_API Stage parse_stage(const std::string& name);

/// Wall-clock milliseconds of each compile phase, from one steady clock.
struct KILN_API CompileTimes {
  double tile_passes_ms = 0;  ///< verify + kiln-expand-composites + canonicalize
  double lowering_ms = 0;     ///< tile -> loops -> LLVM dialect
  double codegen_ms = 0;      ///< LLVM IR translation, optimisation, machine code
  double total_ms() const { return tile_passes_ms + lowering_ms + codegen_ms; }
};

namespace detail { struct CompiledImpl; }

/// A kernel ready to run on one backend. Move-only.
class KILN_API CompiledKernel {
public:
  explicit CompiledKernel(std::unique_ptr<detail::CompiledImpl> impl);
  CompiledKernel(CompiledKernel&&) noexcept;
  CompiledKernel& operator=(CompiledKernel&&) noexcept;
  ~CompiledKernel();

  const KernelSignature& signature() const;
  Backend backend() const;
  const CompileTimes& times() const;
  /// Runs the kernel on `args` (one per signature argument, in order). Dims and strides
  /// are launch values; every argument is checked first (rank, dtype, symbol agreement,
  /// constants, strides) and a kiln::Error names the argument and the rule broken.
  /// On the CPU the call returns when the kernel is done.
  void launch(const std::vector<TensorView>& args) const;

private:
  std::unique_ptr<detail::CompiledImpl> impl_;
};

/// Where kernels compile and run. `Backend::automatic` picks CUDA when a GPU backend
/// is available and the CPU otherwise, and says which in describe().
class KILN_API Runtime {
public:
  static Runtime create(Backend backend = Backend::automatic);
  Backend backend() const { return backend_; }
  /// e.g. "cpu (x86_64-pc-linux-gnu sapphirerapids JIT, f16c); cuda: not built into this
  /// version of kiln"
  const std::string& describe() const { return description_; }
  CompiledKernel compile(const Kernel& kernel) const;
  /// The IR of one stage for this runtime's backend, as text.
  std::string emit(const Kernel& kernel, Stage stage) const;

private:
  Runtime(Backend b, std::string d) : backend_(b), description_(std::move(d)) {}
  Backend backend_;
  std::string description_;
};

} // namespace kiln
