#pragma once
// Internal: the sm_90a GEMM twin's fixed geometry and its shared-memory budget, shared by
// the pass that emits it and the compile options that configure it.
#include <cstdint>

namespace kiln::hopper {

inline constexpr int64_t kTileM = 128, kTileK = 64, kThreads = 384;
/// Dynamic shared memory one CTA may opt into on sm_90 (227 KiB).
inline constexpr int64_t kMaxSharedBytes = 227 * 1024;

/// C staging for the TMA-store epilogue: per consumer warpgroup, two 64 x 64 boxes of
/// 16-bit elements (one filled while the other is stored).
inline constexpr int64_t kStagingBoxBytes = 64 * 64 * 2, kStagingBytes = 2 * 2 * kStagingBoxBytes;

/// Bytes of one ring stage: an A tile (128 x 64) and a B tile (64 x tileN), 16-bit elements.
constexpr int64_t stageBytes(int64_t tileN) { return (kTileM + tileN) * kTileK * 2; }
/// The CTA's dynamic shared memory: the ring, the C staging, two mbarriers per stage, and
/// 1 KiB the kernel may skip to align the ring to 1024 B.
constexpr int64_t sharedBytes(int64_t tileN, int64_t stages) {
  return stages * (stageBytes(tileN) + 16) + kStagingBytes + 1024;
}
/// The deepest ring that fits (6 at width 128, 4 at 256): kiln's default.
constexpr int64_t maxStages(int64_t tileN) {
  int64_t s = 2;
  while (sharedBytes(tileN, s + 1) <= kMaxSharedBytes) ++s;
  return s;
}

} // namespace kiln::hopper
