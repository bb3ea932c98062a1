#pragma once
// Internal: cuDNN's fused attention as the graph cuDNN recognises, written down as plain
// data (tensors and operations) before any cuDNN call, so that what kiln asks of cuDNN can
// be printed and tested without a GPU. Cudnn.cpp turns a Graph into backend descriptors.
//
// The graph is the one frameworks build through cuDNN's frontend for a forward SDPA
// ("composite" form, supported by every cuDNN 9): S = Q K^T (K given as K^T by swapping its
// last two strides), S *= scale, the causal mask as index tiles, a comparison and a select,
// softmax as max, subtract, exp, sum and divide, the statistics ln(sum) + max, then P V.
// cuDNN's engines match this pattern and run one flash-attention kernel.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "CudnnApi.h"
#include "kiln/dtype.hpp"

namespace kiln::cuda::cudnn {

/// One attention problem as cuDNN sees it: Q [B,H,T,D], K and V [B,G,S,D], O [B,H,T,D],
/// element strides per dim (inner stride 1 for all four). Query head h reads K/V head
/// h / (H / G). The T queries are the last T of the S positions: under `causal`, query row r
/// sees keys 0 .. r + S - T (cuDNN's bottom-right diagonal; top-left when T == S).
struct AttentionShape {
  DType dtype = DType::bf16; ///< Q, K, V and O (f16 or bf16)
  int64_t B = 0, H = 0, G = 0, T = 0, S = 0, D = 0;
  std::array<int64_t, 4> q{}, k{}, v{}, o{}; ///< strides, in elements
  bool causal = false;
  /// Sequences padded to T == S: SeqLenQ and SeqLenKV (i32 [B], device memory) hold batch n's
  /// lengths, and its rows and keys past them are padding. The products stop at the lengths
  /// (cuDNN's M/N/K overrides) and the scores past them are masked, as frameworks ask for a
  /// padding mask; under `causal` the diagonal is the top-left one of each sequence.
  bool padded = false;
  /// Packed sequences (with `padded`): Q, K, V and O hold the sequences end to end, sequence
  /// n's first row at the element its ragged offset names (i32 [B + 1] per tensor, device
  /// memory: cuDNN's ragged tensors) instead of at n x stride[0]; T = S is then a bound on
  /// every sequence's length, not a tensor dim.
  bool ragged = false;
  bool stats = false; ///< also write LSE [B,H,T] f32, contiguous: ln sum_c e^(scaled score)
  float scale = 1.0f; ///< the scores' factor, 1/sqrt(D) for kiln's attention
  /// Bytes each of Q, K, V, O, LSE and the lengths is aligned to (a power of two <= 16):
  /// part of the plan (cuDNN's kernels may assume 16).
  std::array<int64_t, 6> alignment{16, 16, 16, 16, 16, 16};
  /// cuDNN before 9.10 wants the lowest float, not -inf, as the masked score.
  bool maskWithLowest = false;

  /// Everything a plan depends on, as text: the key of a plan cache.
  std::string key() const;
};

/// The unique ids of the user's tensors (the variant pack's), fixed so that a plan can be
/// run on any pointers of the same shape.
enum UserTensor : int64_t {
  kQ = 1, kK = 2, kV = 3, kO = 4, kStats = 5, kSeqLenQ = 6, kSeqLenKV = 7,
  kRaggedQ = 8, kRaggedK = 9, kRaggedV = 10, kRaggedO = 11 ///< AttentionShape::ragged: Q's, K's, V's, O's offsets
};

struct TensorSpec {
  int64_t uid = 0;
  std::string name;
  DataType type = kDataFloat;
  std::vector<int64_t> dims, strides;
  int64_t alignment = 16;
  bool isVirtual = false; ///< an intermediate cuDNN keeps in registers or shared memory
  bool byValue = false;   ///< a scalar passed by value (host memory) in the variant pack
  int64_t ragged = 0;     ///< the uid of this tensor's ragged offsets (described before it), or 0
  float f32 = 0;          ///< byValue, kDataFloat
  int32_t i32 = 0;        ///< byValue, kDataInt32
};

enum class OpKind { matmul, pointwise, reduction };

struct OpSpec {
  OpKind kind = OpKind::pointwise;
  std::string name;
  int mode = 0;          ///< PointwiseMode or ReduceOp
  int64_t axis = -1;     ///< pointwise: GEN_INDEX's axis (and the frontend's, on index arithmetic)
  DataType compute = kDataFloat;
  int64_t x = 0, b = 0, t = 0, y = 0; ///< tensor uids (0: none); matmul: A = x, B = b, C = y
  /// matmul: the uids of per-batch i32 tensors that bound the product's M, N and K (0: the
  /// dims'), and whether the rows and columns past them read as 0 (cuDNN's padding value).
  int64_t mOverride = 0, nOverride = 0, kOverride = 0;
  bool zeroPadding = false;
};

struct Graph {
  std::vector<TensorSpec> tensors;
  std::vector<OpSpec> ops;
  const TensorSpec& tensor(int64_t uid) const;
  /// One line per operation: "matmul bmm1: Q[1,8,128,64] x K^T[1,8,64,128] -> S[...] f32".
  std::string describe() const;
};

/// Checks the shape's rules (kiln::Error(InvalidArgument) naming the broken one: dims,
/// dtype, strides, H % G) and builds its graph.
Graph attentionGraph(const AttentionShape& shape);

} // namespace kiln::cuda::cudnn
