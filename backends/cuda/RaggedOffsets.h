#pragma once
// Internal: the step frameworks take before cuDNN's attention over packed sequences. kiln's
// packed tensors (and flash-attention's varlen calls) name each sequence by its first token
// (i32 offsets [B + 1]); cuDNN's ragged tensors want, per tensor, the element where each
// sequence starts, and the padding mask each sequence's length. One small kernel of ours
// (PTX, like the L2 flush) writes both on the caller's stream.
#include "Driver.h"

#include <cstdint>

namespace kiln::cuda {

class RaggedOffsets {
public:
  RaggedOffsets();
  /// Reads offsets[0 .. n] (i32, device memory), each clamped to [0, tokens], and writes
  /// into `out` (values(n) i32, five arrays `stride(n)` apart, so each starts 16-byte
  /// aligned): the lengths max(0, min(end - start, maxLen)) of the n sequences, then for
  /// each of Q, K, V, O (`perToken`: its elements per token, the stride of its sequence
  /// dim) the n + 1 starts times that. Clamping keeps every row cuDNN reads inside the
  /// tensors whatever the offsets hold. The caller checks that tokens x perToken[i] fits an
  /// i32.
  void run(CUdeviceptr offsets, CUdeviceptr out, uint32_t n, uint32_t tokens, const uint32_t perToken[4],
           uint32_t maxLen, CUstream stream);

  /// The i32 values between two of `run`'s arrays, and all it writes, for n sequences.
  static size_t stride(uint32_t n) { return (size_t(n) + 1 + 3) / 4 * 4; }
  static size_t values(uint32_t n) { return 5 * stride(n); }
  /// Where array k (0: the lengths, 1..4: Q's, K's, V's, O's starts) begins.
  static CUdeviceptr at(CUdeviceptr out, uint32_t n, int k) { return out + 4 * stride(n) * size_t(k); }

private:
  Module module_;
  CUfunction fn_ = nullptr;
};

} // namespace kiln::cuda
