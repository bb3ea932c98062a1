#pragma once
#include <vector>

#include "kiln/export.hpp"
#include "kiln/tensor.hpp"

namespace kiln { class Runtime; }

/// Host references in double precision (Eigen), for the verifier. Inputs are read through
/// their views (any dtype, any strides); results are row-major doubles. gpu_gemm is the
/// GPU reference: cuBLASLt on a CUDA runtime's device (docs/verifier.md, "GPU references").
namespace kiln::reference {

/// What follows the product: nothing, or bias then ReLU / GELU / nothing more.
enum class Epilogue { none, bias_relu, bias_gelu, bias };

/// C[M,N] = epilogue(A[M,K] @ B[K,N] + bias[N] + residual[M,N]); bias ignored for
/// Epilogue::none; residual optional (nullptr: none).
KILN_API std::vector<double> gemm(const TensorView& a, const TensorView& b,
                                  const TensorView* bias, Epilogue epilogue,
                                  const TensorView* residual = nullptr);
/// C[M,N] = epilogue(A[M,K] @ B[K,N] + bias[N] + residual[M,N]) on the GPU with cuBLASLt, in `rt`'s CUDA
/// context: device memory in, device memory out, finished when it returns. A, B, bias and
/// C share one dtype (f32, bf16 or f16); the product accumulates in f32 (CUBLAS_COMPUTE_32F:
/// plain f32, never TF32) and the epilogue is cuBLASLt's (CUBLASLT_EPILOGUE_RELU_BIAS,
/// CUBLASLT_EPILOGUE_GELU_BIAS: the tanh GELU, like gelu() below; CUBLASLT_EPILOGUE_BIAS;
/// the residual enters as cuBLASLt's C with beta = 1, before the epilogue). Matrices are read and
/// written through their views: row-major with any row stride >= the row length, inner
/// stride 1; bias contiguous. Throws kiln::Error:
///  - InvalidArgument naming the argument for a wrong rank, shape, dtype or stride, a
///    missing bias, or (on the device) a host pointer or a misaligned one;
///  - Unsupported when `rt` is not a CUDA runtime with a GPU, or libcublasLt.so.13 is
///    missing, or cuBLASLt has no algorithm for the problem.
KILN_API void gpu_gemm(const Runtime& rt, const TensorView& a, const TensorView& b,
                       const TensorView* bias, Epilogue epilogue, const TensorView& c,
                       const TensorView* residual = nullptr);
/// As gpu_gemm, but enqueued on `stream` (a CUstream; nullptr: the context's legacy
/// stream, the one CompiledKernel::launch(args) and the profiler use) without waiting: the
/// framework route of kiln bench and of an engine's own pipeline. Argument errors throw
/// at once; errors of the GEMM's execution surface at the next synchronisation.
KILN_API void gpu_gemm_async(const Runtime& rt, const TensorView& a, const TensorView& b,
                             const TensorView* bias, Epilogue epilogue, const TensorView& c,
                             const TensorView* residual, void* stream);
/// Row-wise softmax of X[M,N].
KILN_API std::vector<double> softmax(const TensorView& x);
/// Elementwise X + Y, same dims.
KILN_API std::vector<double> add(const TensorView& x, const TensorView& y);
/// Y[m,n] = X[m,n] / sqrt(mean_n(X[m,:]^2) + eps) * W[n].
KILN_API std::vector<double> rmsnorm(const TensorView& x, const TensorView& w, double eps);
/// H = silu(X Wg) * (X Wu), silu(g) = g / (1 + e^-g), elementwise; X [M,K], Wg and Wu [K,N].
/// Throws kiln::Error(InvalidArgument) naming the argument whose shape does not fit.
KILN_API std::vector<double> swiglu(const TensorView& x, const TensorView& wg, const TensorView& wu);
/// RoPE, rotate-half: X [T,H,D], Cos and Sin [P, D/2], Positions [T] (i32, 0 .. P-1): token
/// t's head halves x1, x2 -> x1 c - x2 s, x2 c + x1 s, c and s row Positions[t] of the tables.
/// Throws kiln::Error(InvalidArgument) naming a wrong shape, dtype or position.
KILN_API std::vector<double> rope(const TensorView& x, const TensorView& cos, const TensorView& sin,
                                  const TensorView& positions);

/// O = softmax(Q K^T / sqrt(D) [+ causal mask]) V: Q [B,H,T,D], K and V [B,G,S,D] with
/// T <= S, query head h reading K/V head h / (H / G) (H a multiple of G). The queries are the
/// last T of the S positions (T = S: the whole sequence), so under `causal` query row r sees
/// keys 0 .. r + S - T. Returns the D outputs of each query row listed in `rows` (indices
/// into the B*H*T rows of O, row-major), in that order; every row when `rows` is empty. Each
/// row costs 2*S*D multiply-adds. With `lse`, also each listed row's log-sum-exp of its
/// scaled scores, ln sum_c e^(q.k_c / sqrt(D)) over the keys it sees, into *lse (same order).
KILN_API std::vector<double> attention(const TensorView& q, const TensorView& k, const TensorView& v, bool causal,
                                       const std::vector<int64_t>& rows = {}, std::vector<double>* lse = nullptr);

/// The same attention on the GPU with cuDNN's fused flash attention (the kernel PyTorch's SDPA
/// and other frameworks call; cuDNN 9, loaded at run time from libcudnn.so.9 or the file
/// KILN_CUDNN_LIBRARY names), in `rt`'s CUDA context: device memory in, device memory out,
/// finished when it returns. Q [B,H,T,D] and O like it, K and V [B,G,S,D], all bf16 or all
/// f16, any strides with inner stride 1; scores scaled by 1/sqrt(D); under `causal` query row r
/// sees keys 0 .. r + S - T (the queries are the last T of S). With `lse` (f32 [B,H,T],
/// contiguous), also each query row's log-sum-exp of its scaled scores, as reference::attention
/// gives it. The first call for a shape builds cuDNN's plan for it (heuristics, and its own
/// runtime compilation where its engine needs one); later calls reuse it. Throws kiln::Error:
///  - InvalidArgument naming the argument for a wrong rank, shape, dtype or stride, or (on the
///    device) a host pointer;
///  - Unsupported when `rt` is not a CUDA runtime with a GPU, cuDNN 9 is missing, or cuDNN has
///    no engine for the problem (the message names the shape and each engine's refusal).
KILN_API void gpu_attention(const Runtime& rt, const TensorView& q, const TensorView& k, const TensorView& v,
                            bool causal, const TensorView& o, const TensorView* lse = nullptr);
/// As gpu_attention, but enqueued on `stream` (a CUstream; nullptr: the legacy stream)
/// without waiting: the framework route of kiln bench. Argument errors throw at once. The
/// runtime's cuDNN calls share one workspace (and, packed, one buffer of offsets): calls
/// enqueued on different streams must not run at the same time.
KILN_API void gpu_attention_async(const Runtime& rt, const TensorView& q, const TensorView& k, const TensorView& v,
                                  bool causal, const TensorView& o, const TensorView* lse, void* stream);

/// gpu_attention over B sequences padded to a common length S: Q and O [B,H,S,D], K and V
/// [B,G,S,D] as gpu_attention takes them (T == S), and `lens` (i32 [B], contiguous, device
/// memory) sequence n's length, 1 .. S. Its query rows 0 .. len-1 attend to its keys
/// 0 .. len-1 (under `causal`, row r to keys 0 .. r): cuDNN's padding mask, its products
/// bounded by the lengths, as frameworks ask for it. K's and V's rows past a length must be
/// finite: cuDNN multiplies V's by zero weights, so NaN there would reach the result. O's rows
/// past a length are left as cuDNN writes them. Throws as gpu_attention,
/// and InvalidArgument for lengths of another dtype or shape or Q's T other than K's S.
KILN_API void gpu_attention_padded(const Runtime& rt, const TensorView& q, const TensorView& k, const TensorView& v,
                                   const TensorView& lens, bool causal, const TensorView& o);
/// As gpu_attention_padded, enqueued on `stream` without waiting (kiln bench's framework route).
KILN_API void gpu_attention_padded_async(const Runtime& rt, const TensorView& q, const TensorView& k,
                                         const TensorView& v, const TensorView& lens, bool causal,
                                         const TensorView& o, void* stream);

/// gpu_attention over B sequences packed end to end, as frameworks' variable-length
/// attention takes them (cuDNN's ragged tensors): Q and O [H,T,D], K and V [G,T,D] over all
/// T tokens, any strides with inner stride 1 (head-major or token-major memory), and
/// `offsets` (i32 [B+1], contiguous, device memory): sequence n is tokens offsets[n] ..
/// offsets[n+1]-1, its queries attending to its own keys (under `causal`, query r of the
/// sequence to keys 0 .. r). `max_len` (1 .. T, frameworks' max_seqlen) must be at least
/// every sequence's length: cuDNN computes only a sequence's first max_len rows, and its
/// plan is made for that bound (one plan per value). Offsets are clamped to [0, T], so no
/// row outside the tensors is read or written whatever they hold; O's rows outside every
/// sequence are left as they were. Before cuDNN, one small kernel of kiln's derives the
/// lengths and each tensor's element offsets on the same stream (the step frameworks take
/// too). Throws as gpu_attention, and InvalidArgument for a wrong rank, shape, dtype or
/// stride of any argument, offsets of another dtype or shape, or max_len outside 1 .. T;
/// Unsupported when a tensor's rows lie past what cuDNN's 32-bit offsets reach.
KILN_API void gpu_attention_packed(const Runtime& rt, const TensorView& q, const TensorView& k, const TensorView& v,
                                   const TensorView& offsets, int64_t max_len, bool causal, const TensorView& o);
/// As gpu_attention_packed, enqueued on `stream` without waiting (kiln bench's framework route).
KILN_API void gpu_attention_packed_async(const Runtime& rt, const TensorView& q, const TensorView& k,
                                         const TensorView& v, const TensorView& offsets, int64_t max_len,
                                         bool causal, const TensorView& o, void* stream);

/// GELU, tanh approximation (the form cuBLASLt's epilogue and kiln's tile.gelu use).
KILN_API double gelu(double x);

} // namespace kiln::reference
