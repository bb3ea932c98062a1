#pragma once
// Internal: which CPU the CPU backend's JIT generates code for.
//
// By default the host's own CPU (its name and every feature it reports). A user may force
// another x86-64 CPU through RuntimeOptions::cpu or $KILN_CPU: a baseline such as
// x86-64-v2 (what every x86-64 server runs), to reproduce on one machine what kiln does on
// another. Invariant: a forced CPU never needs an instruction the host lacks, so code JIT'd
// for it always runs here.
#include <memory>
#include <string>

namespace llvm {
class TargetMachine;
namespace orc {
class JITTargetMachineBuilder;
}
} // namespace llvm

namespace kiln::cpu {

struct CpuTarget {
  std::string triple;   ///< the host's process triple ("x86_64-pc-linux-gnu")
  std::string cpu;      ///< an LLVM CPU name: the host's ("znver3") or the forced one
  std::string features; ///< host: its feature string; forced: empty (the CPU's own)
  std::string hostCpu;  ///< the host's LLVM CPU name, whichever target is chosen
  std::string forcedBy; ///< "" for the host, else "KILN_CPU" or "RuntimeOptions::cpu"

  /// A target machine for this CPU (codegen level O3). Throws kiln::Error(Unsupported).
  std::unique_ptr<llvm::TargetMachine> machine() const;
  /// The builder an LLJIT needs to load code made for this CPU.
  llvm::orc::JITTargetMachineBuilder builder() const;
  /// "x86_64-pc-linux-gnu znver3", or "... x86-64-v2 (forced by KILN_CPU; host znver3)".
  std::string describe() const;
};

/// The target for `option` (RuntimeOptions::cpu); when that is empty, $KILN_CPU; when that
/// is empty too, or either says "host", the host. Throws kiln::Error(InvalidArgument) for
/// a name LLVM does not know as an x86-64 CPU, and kiln::Error(Unsupported) for a CPU that
/// needs features this host lacks (naming them) or forcing on a non-x86 host.
CpuTarget chooseTarget(const std::string& option);

} // namespace kiln::cpu
