#pragma once
// Internal: how the profiler empties the GPU's L2 between timed launches.
#include "Driver.h"

#include <cstdint>

namespace kiln::cuda {

/// Reads a 512 MiB buffer through the L2 (a kernel of ours, loaded from PTX): every line
/// the timed launch's inputs and outputs held is gone afterwards, and the lines left are
/// clean. A memset leaves the L2 full of its own dirty lines instead, and the next launch
/// pays for writing them back: on the H200 cuBLASLt's 16 x 4096 x 4096 GEMM timed 18.3 us
/// after a memset and 14.7 us after this read (12 us of kernel under ncu, whose flush
/// invalidates the L2). Made by each profile::time call (the buffer, filled once so no read
/// is of uninitialised memory, and the module); a context must be current for every call.
class L2Flush {
public:
  explicit L2Flush(int smCount);
  /// Queues the read on `stream` (the profiler's events are on it) and returns:
  /// the GPU is busy for the ~0.15 ms it takes, so the launch queued after it is timed from
  /// the GPU's clock, not the host's enqueue.
  void run(CUstream stream = nullptr);

private:
  DeviceBuffer buffer_, sink_;
  Module module_;
  CUfunction read_ = nullptr;
  int blocks_ = 0;
};

} // namespace kiln::cuda
