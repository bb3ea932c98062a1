#pragma once
// Internal: one kernel's module compiled from PTX and loaded on a thread of its own, and
// waited for only when something needs it. A kernel with an sm_90a twin uses it for its
// portable fallback: the twin, which runs whenever the arguments allow, is ready first,
// and the fallback's compile (about half the cold compile of an attention kernel) no
// longer holds up the first launch.
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <string>

#include "Driver.h"

namespace kiln::cuda {

class BackgroundModule {
public:
  /// What the thread made. Exactly one of `function` and `error` is set.
  struct Loaded {
    Module module;
    CUfunction function = nullptr;
    int registers = -1;   ///< per thread, -1 when unknown
    int spill_bytes = -1; ///< spill stores + loads, -1 when unknown
    std::string compiler; ///< "nvJitLink 13.0" or "the CUDA driver's PTX JIT"
    std::string notes;    ///< ptxas's warnings ("; "-separated)
    double ms = 0;        ///< compile + load, on the thread
    std::exception_ptr error;
  };

  BackgroundModule() = default;
  /// Who compiles: nvJitLink keeps the driver free for the launches meanwhile (a first
  /// compile); the driver's JIT keeps the machine code in its disk cache, so a later
  /// process loading the same PTX pays ~1 ms (a kiln cache hit).
  enum class Compiler { NvJitLink, Driver };
  /// Starts compiling the PTX `ptx()` gives (entry `name`, `sharedBytes` of dynamic shared
  /// memory; it may wait for the PTX, or throw) for `arch` on a new thread, which first
  /// calls `enter` (makes the CUDA context current; what these capture lives as long as
  /// the thread). NvJitLink falls back to the driver where nvJitLink is missing.
  BackgroundModule(std::function<void()> enter, std::function<std::string()> ptx, std::string arch,
                   std::string name, int64_t sharedBytes, Compiler compiler);
  explicit operator bool() const { return job_.valid(); }
  /// Waits for the thread; what it made. Never throws: a failed compile is `error`.
  const Loaded& wait() const;
  /// The entry, waiting for the thread if need be; rethrows the compile's error.
  CUfunction function() const;

private:
  std::shared_future<std::shared_ptr<const Loaded>> job_;
};

} // namespace kiln::cuda
