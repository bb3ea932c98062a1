#pragma once
// Internal: the sm_90a GEMM twin's fixed geometry and its shared-memory budget, shared by
// the pass that emits it and the compile options that configure it.
#include <cstdint>

namespace kiln::hopper {

inline constexpr int64_t kTileK = 64;
/// Dynamic shared memory one CTA may opt into on sm_90 (227 KiB).
inline constexpr int64_t kMaxSharedBytes = 227 * 1024;

/// A twin's tile is tileM x tileN: tileM 128 (two consumer warpgroups of 64 rows each, on
/// the same tile) or 64 (one), tileN 128, 192 or 256. One producer warpgroup besides.
/// The 64 x 256 tile is ping-pong: two consumer warpgroups, each on a whole tile of its
/// own, taking the CTA's tiles in turn, so one's epilogue runs beside the other's main loop
/// (experimental: asked for, never kiln's own choice).
constexpr bool pingpong(int64_t tileM, int64_t tileN) { return tileM == 64 && tileN == 256; }
/// The tall 256 x 128 tile (one of kiln's own, or asked for by tileM 256): two consumer
/// warpgroups of 128 rows, each holding two m64n128 accumulators (its
/// `rowParts`) that share B's descriptor: the 128 x 256 tile's bytes per multiply-add, with
/// half as many columns per tile (C of 4104 columns in 33 of them where 256-wide tiles take 17).
constexpr bool tall(int64_t tileM) { return tileM == 256; }
/// 64-row parts of the tile each consumer warpgroup computes: 2 in the tall tile, else 1.
constexpr int64_t rowParts(int64_t tileM) { return tall(tileM) ? 2 : 1; }
/// kiln's decode twins: 16, 32, 48 and 64 rows (C of at most 16 rows, 17 to 32, 33 to 48, 49 to 64).
inline constexpr int kDecodeRows = 64;
/// `swapAB`: the decode twin's tile (tileM rows of C, 16 to 64, by 64 columns), computed as
/// C^T = B^T A^T by one consumer warpgroup (WgmmaGemm.cpp); a swapped twin of 128 columns
/// (tileM 80 to 128 rows) has two, one per 64 columns, both on the same rows.
constexpr int64_t consumers(int64_t tileM, int64_t tileN, bool swapAB = false) {
  return pingpong(tileM, tileN) ? 2 : swapAB ? tileN / 64 : tileM / 64 / rowParts(tileM);
}
/// kiln's swapped twins of 128 columns: 80, 96, 112 and 128 rows of C (Twins.h). For C of
/// 129 to 512 rows, where a 128-row tile would multiply many absent rows: 160 rows in two
/// tiles of 80, not of 128. (cuBLASLt's kernels on the H200 do the same: 160 x 8192 x 8192
/// in tiles of 80 rows by 128 columns, computed transposed.)
inline constexpr int kWideRows = 128;
constexpr int64_t threads(int64_t tileM, int64_t tileN, bool swapAB = false) {
  return 128 * (1 + consumers(tileM, tileN, swapAB));
}

/// setmaxnreg moves registers within the CTA's pool, which is what the launch gave it:
/// threads x the per-thread count ptxas may use at that block size (64 K / threads, in
/// multiples of 8). A warpgroup asking for more than the pool holds waits forever, so each
/// consumer thread gets the pool less the producer warpgroup's `producerRegs` a thread, in
/// multiples of 8, at most 240 (ptxas's limit under setmaxnreg). At 384 threads the pool is
/// 384 x 168: 240 with a producer at 24, 232 at 32; at 512, 160 with a producer at 32.
constexpr int64_t consumerRegisters(int64_t threads, int64_t producerRegs) {
  const int64_t pool = 65536 / threads / 8 * 8 * threads, consumerThreads = threads - 128;
  const int64_t regs = (pool - 128 * producerRegs) / consumerThreads / 8 * 8;
  return regs < 240 ? regs : 240;
}
/// The GEMM twin's producer (its TMA loop alone) after setmaxnreg, with two consumers: 240 each.
inline constexpr int32_t kGemmProducerRegs = 24;
static_assert(consumerRegisters(384, 24) == 240 && consumerRegisters(384, 32) == 232 && consumerRegisters(512, 32) == 160);

/// C staging for the TMA-store epilogue: per consumer warpgroup, two 64 x 64 boxes of
/// 16-bit elements (one filled while the other is stored).
inline constexpr int64_t kStagingBoxBytes = 64 * 64 * 2;
/// The decode twin stores C from registers (no staging) and may run in clusters of up to
/// kKClusterMax CTAs that cut each tile along K: the CTA of rank 0 receives its peers'
/// partial sums here, one slot of 64 x tileM f32 per peer (Sm90Tiles.h, K-clusters).
inline constexpr int64_t kKClusterMax = 4;
constexpr int64_t peerSumSlotBytes(int64_t tileM) { return 64 * tileM * 4; }
constexpr int64_t stagingBytes(int64_t tileM, int64_t tileN, bool swapAB = false) {
  // (Swapped twins of 128 columns run without K-clusters: no slots.)
  return swapAB ? (tileN == 64 ? (kKClusterMax - 1) * peerSumSlotBytes(tileM) : 0)
                : consumers(tileM, tileN) * 2 * kStagingBoxBytes;
}

/// A 4-byte word per consumer warpgroup: the split-K fix-up tells its threads whether
/// they reduce the tile. (The decode twin keeps its two K-cluster mbarriers there.)
inline constexpr int64_t kFlagBytes = 16;

/// Bytes of one ring stage: an A tile (tileM x 64) and a B tile (64 x tileN), 16-bit elements.
constexpr int64_t stageBytes(int64_t tileM, int64_t tileN) { return (tileM + tileN) * kTileK * 2; }
/// The CTA's dynamic shared memory: the ring, the C staging, two mbarriers per stage, the
/// fix-up flags, and 1 KiB the kernel may skip to align the ring to 1024 B.
constexpr int64_t sharedBytes(int64_t tileM, int64_t tileN, int64_t stages, bool swapAB = false) {
  return stages * (stageBytes(tileM, tileN) + 16) + stagingBytes(tileM, tileN, swapAB) + kFlagBytes + 1024;
}
/// The decode twins' ring: 8 stages, not the deepest that fits (20 and 16). A decode GEMM
/// streams its weight through every SM at once; with deep rings each asks for more than
/// DRAM can serve in time, and the last CTA to be served sets the kernel's end. H200,
/// 2026-12-01, bf16: 16 x 4096 x 4096 in 13.6 us at 8 stages against 14.0 at 20 (13.3 at
/// 6); 8 x 4096 x 14336 33.5 against 34.9 (32.8); 1 x 8192 x 8192 36.2 against 37.1 (36.2);
/// 16 x 28672 x 4096 62.0 against 63.2 (65.6).
inline constexpr int64_t kDecodeStages = 8;
/// The deepest ring that fits (6 at 128 x 128, 4 at 128 x 256 and 64 x 256, 8 at 64 x 128):
/// kiln's default but for the decode twins.
constexpr int64_t maxStages(int64_t tileM, int64_t tileN, bool swapAB = false) {
  int64_t s = 2;
  while (sharedBytes(tileM, tileN, s + 1, swapAB) <= kMaxSharedBytes) ++s;
  return s;
}

// Split-K. A launch with S split tiles (the last S of C's tiles in the kernel's order) and
// s splits gives its other tiles whole to its G CTAs, round-robin, then cuts each split tile
// into s chunks of k-steps, [j kTiles / s, (j + 1) kTiles / s), as work units u = j S + t
// (chunk-major: CTAs running together read the same k range), CTA b taking units b, b + G,
// ... A tile's chunks are summed in a fixed order (by j) by the consumer warpgroup that
// finishes its chunk last, from partial sums in the workspace:
//   [0, kSplitKCounterBytes): per split tile, two 32-bit arrival counters, one per consumer
//     warpgroup (the second unused with one); zero between launches (the last arrival
//     resets its counter);
//   then per unit u, a slot of tileM x tileN f32: per consumer warpgroup 128 threads x
//     tileN / 2 f32 in fragment order, 16 bytes per thread per step.
// The host (Sm90Launch.cpp) and the kernel (WgmmaGemm.cpp's work loop, SplitK.cpp's slots)
// compute these the same way.
inline constexpr int64_t kSplitKCounterBytes = 64 * 1024;
//
// K-clusters (the decode twin, which has no workspace): a launch in clusters of s CTAs
// (2..kKClusterMax, a launch attribute: the kernel reads s and its rank r) gives cluster c
// tiles c, c + clusters, ..., every CTA of it the same tiles, rank r their k-steps
// [r kTiles / s, (r + 1) kTiles / s). Rank r > 0 writes its partial sums into slot r - 1 of
// rank 0's shared memory (distributed shared memory: no round trip to DRAM, which a
// decode GEMM keeps busy) and arrives on rank 0's `sums` mbarrier; rank 0 adds them to its
// own in rank order (the same bits whichever CTA finishes first), runs the epilogue, and
// frees the slots by arriving on each peer's `free` mbarrier before the peers' next tile.
// On the H200 the workspace's fix-up (stores, fences, an atomic, loads, each queued behind
// the weight's reads) cost more than the split saved: 16 x 4096 x 4096 took 14.9 us in 2
// chunks against 13.6 whole.
/// Arrival counters per split tile: one per consumer warpgroup of the 128-row tile (the
/// 64-row tile leaves its second unused), 4 bytes each.
inline constexpr int64_t kSplitKCountersPerTile = 2;
/// Every chunk has at least this many k-steps (shorter would cost more in pipeline fill
/// and fix-up than it spreads).
inline constexpr int64_t kSplitKMinSteps = 4;
constexpr int64_t splitKSlotBytes(int64_t tileM, int64_t tileN) { return tileM * tileN * 4; }
constexpr int64_t splitKWorkspaceBytes(int64_t tileM, int64_t tileN, int64_t splitTiles, int64_t splits) {
  return kSplitKCounterBytes + splitTiles * splits * splitKSlotBytes(tileM, tileN);
}

} // namespace kiln::hopper
