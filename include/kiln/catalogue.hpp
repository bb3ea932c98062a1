#pragma once
// kiln's built-in kernels, written with the same public DSL a user writes
// (lib/Catalogue/Kernels.cpp), each with the problem generator and Eigen reference the
// CLI, the tests and the demo use to run and verify it.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kiln/dtype.hpp"
#include "kiln/export.hpp"
#include "kiln/handwritten.hpp"
#include "kiln/kernel.hpp"
#include "kiln/runtime.hpp"
#include "kiln/tensor.hpp"
#include "kiln/verify.hpp"

namespace kiln::catalogue {

/// Tile sizes of a GEMM-shaped kernel: plain C++ values, fixed when the kernel is traced.
struct GemmTiles {
  int64_t m = 64, n = 64, k = 32;
  int64_t stages = 3;
};
/// Tile sizes of a row-wise kernel: `rows` rows per program, `cols` columns per step.
struct RowTiles {
  int64_t rows = 4, cols = 256;
};

/// Tile sizes of attention: `q` query rows per program, `kv` keys per step of its loop.
struct AttentionTiles {
  int64_t q = 64, kv = 64;
};

KILN_API Kernel gemm(DType dtype, GemmTiles t = {});
KILN_API Kernel gemm_bias_relu(DType dtype, GemmTiles t = {});
KILN_API Kernel gemm_bias_gelu(DType dtype, GemmTiles t = {});
/// C = A @ B + bias + R: a transformer block's second projection with its residual.
KILN_API Kernel gemm_bias_residual(DType dtype, GemmTiles t = {});
KILN_API Kernel softmax(DType dtype, RowTiles t = {});
KILN_API Kernel add(DType dtype, RowTiles t = {});
KILN_API Kernel rmsnorm(DType dtype, double eps = 1e-6, RowTiles t = {});
/// H = silu(X @ Wg) * (X @ Wu) (X [M,K], Wg and Wu [K,N], H [M,N]): a SwiGLU MLP's gate and up
/// projections in one kernel, both products in one loop over K, the gating from registers.
/// On sm_90a a TMA + wgmma twin computes both products with one wgmma (tiles 128 x 64,
/// 128 x 128 or 64 x 64 of H; `t` is the portable kernel's).
KILN_API Kernel swiglu(DType dtype, GemmTiles t = {});
/// Rotary position embedding, Llama's rotate-half form: X and Y [T, H, D] (token-major), the
/// tables Cos and Sin [P, D/2] (f32: cos and sin of p theta_i), Positions [T] (i32, each in
/// 0 .. P-1): each head's halves x1, x2 of token t become x1 cos - x2 sin, x2 cos + x1 sin at
/// row Positions[t] of the tables. In place over X allowed. D even, fixed per kernel
/// (kiln::Error(InvalidArgument) otherwise); `t.rows` heads per program.
KILN_API Kernel rope(DType dtype, int64_t D, RowTiles t = {8, 0});
/// O = softmax(Q K^T / sqrt(D) [+ causal mask]) V per batch and query head: Q and O
/// [B, H, S, D], K and V [B, G, S, D], query head h reading K/V head h / (H / G) (G = H:
/// multi-head; G < H: grouped-query attention, H a multiple of G). The head dim D is fixed
/// when the kernel is traced; B, H, G and S are launch values.
KILN_API Kernel attention(DType dtype, int64_t head_dim, bool causal, AttentionTiles t = {});
/// Causal attention over a K/V cache: Q and O [B, H, T, D] are the last T of the S positions
/// whose keys and values K and V [B, G, S, D] hold (T <= S), so query row r attends to keys
/// 0 .. r + S - T. A decode step (T = 1 .. 8 new tokens against a long cache) or a prefill
/// chunk; T = S is attention(dtype, head_dim, true). GQA as in attention().
KILN_API Kernel attention_decode(DType dtype, int64_t head_dim, AttentionTiles t = {});
/// attention() and attention_decode() with a second output, LSE [B, H, T] (f32, T = S for
/// attention_lse): each query row's log-sum-exp of its scaled scores over the keys it sees,
/// ln sum_k e^(q.k / sqrt(D)). What merging attention over disjoint key sets needs (keys split
/// across devices, a shared prefix's attention beside each sequence's own): with parts p,
/// LSE = ln sum_p e^(LSE_p) and O = sum_p e^(LSE_p - LSE) O_p. Kernels "attention_lse",
/// "attention_causal_lse" and "attention_decode_lse"; arguments Q, K, V, O, LSE.
KILN_API Kernel attention_lse(DType dtype, int64_t head_dim, bool causal, AttentionTiles t = {});
KILN_API Kernel attention_decode_lse(DType dtype, int64_t head_dim, AttentionTiles t = {});
/// attention() over a batch of sequences padded to one length S: Q and O [B, H, S, D], K and
/// V [B, G, S, D] as in attention(), and Lens [B] (i32): sequence b is its first Lens[b]
/// positions (S where Lens[b] > S); its queries attend to those keys only (causal: up to
/// their own position), whatever the padding holds. O's rows past a length are padding: a
/// query tile wholly past it is written as zeros, the rest from the padding's queries.
/// Kernels "attention_padded" and "attention_padded_causal"; arguments Q, K, V, Lens, O.
/// On sm_90a the attention twin runs it (K and V windowed to each length).
KILN_API Kernel attention_padded(DType dtype, int64_t head_dim, bool causal, AttentionTiles t = {});
/// attention() over a batch of sequences packed end to end (no padding): Q and O [H, T, D],
/// K and V [G, T, D] over all T tokens, and Offsets [B + 1] (i32): sequence n is tokens
/// [Offsets[n], Offsets[n + 1]), and its queries attend to its own keys only (causal: to those
/// up to their own position). Token-major memory [T, H, D] is passed as a view of dims
/// [H, T, D] and strides [D, H * D, 1]. Nothing outside the sequences is read or written.
/// Kernels "attention_packed" and "attention_packed_causal"; arguments Q, K, V, Offsets, O.
/// On sm_90a the attention twin runs it (every tensor windowed to each sequence).
KILN_API Kernel attention_packed(DType dtype, int64_t head_dim, bool causal, AttentionTiles t = {});

/// Inputs on fresh random data, the output poisoned (NaN), and the reference.
struct KILN_API Problem {
  std::vector<HostTensor> args; ///< in signature order
  size_t output = 0;            ///< index of the output argument
  std::vector<double> reference;
  /// Empty: `reference` holds every output element, row-major. Otherwise the (row-major)
  /// indices of the output elements it holds, in its order: a large problem whose whole
  /// f64 host reference would take minutes is checked on a sample spread over it.
  std::vector<int64_t> checked;
  /// Ranges [first, last) of output elements (row-major) that no route defines: the rows of
  /// padded sequences past their lengths. Comparisons between routes' outputs skip them.
  std::vector<std::pair<int64_t, int64_t>> padding;
  double flops = 0;
  /// Outputs checked beside `output` (attention's log-sum-exp), each as `output` is: its
  /// argument, its reference and which elements that holds (`checked`, empty for all).
  struct More {
    std::string name; ///< as the kernel's signature names the argument ("LSE")
    size_t arg = 0;
    std::vector<double> reference;
    std::vector<int64_t> checked;
  };
  std::vector<More> more_outputs;
  std::vector<TensorView> views();
  /// Fills every output with NaN (before a run whose results are checked).
  void poison_outputs();
};

/// A problem's arguments in a runtime's memory (the GPU's on CUDA): the inputs and the
/// poisoned output, with views ready to launch on.
struct KILN_API DeviceProblem {
  std::vector<DeviceTensor> tensors;
  std::vector<TensorView> views;
};
KILN_API DeviceProblem upload(const Runtime& rt, const Problem& p);
/// Downloads the outputs of `d` into `p` and verifies each against its reference under its
/// dtype's default tolerance: the report of the first that fails (its `output` naming a
/// further one), else the first output's.
KILN_API verify::Report verify_output(const Runtime& rt, const DeviceProblem& d, Problem& p);
/// Each output's report, the first output's first (then Problem::more_outputs' in order).
KILN_API std::vector<verify::Report> verify_outputs(const Runtime& rt, const DeviceProblem& d, Problem& p);

/// A kernel's hand-written CUDA C++ version (kiln bench's `cuda` route, compiled with
/// NVRTC): the source, and how to launch it on a Problem's arguments (same order).
struct KILN_API Handwritten {
  CudaSource source;
  std::function<void(const HandwrittenKernel&, const std::vector<TensorView>& args, void* stream)> launch;
};

enum class Activation { none, relu, gelu };

/// The separate elementwise pass of an eager framework path (lib/Catalogue/cuda/epilogue.cu,
/// compiled with NVRTC): after a library GEMM wrote C = A @ B, C = act(C + bias) + residual
/// in place. `bias` ([N], contiguous) and `residual` ([M,N], inner stride 1) may be null.
struct KILN_API EagerEpilogue {
  CudaSource source;
  std::function<void(const HandwrittenKernel&, const TensorView& c, const TensorView* bias,
                     const TensorView* residual, Activation act, void* stream)>
      launch;
};
KILN_API EagerEpilogue eager_epilogue(DType dtype);

struct KILN_API Entry {
  std::string name;
  std::string summary;
  std::string shape_help; ///< "MxNxK" or "MxN"
  size_t shape_rank = 0;  ///< how many numbers --shape takes
  std::function<Kernel(DType)> make;
  std::function<Problem(const std::vector<int64_t>& shape, DType, uint64_t seed)> problem;
  /// Empty when the kernel has no hand-written version.
  std::function<Handwritten(DType)> handwritten;
  /// GEMM kernels: the kernel with given tiles (what `kiln tune` searches); empty otherwise.
  std::function<Kernel(DType, GemmTiles)> make_tiled;
  /// GEMM kernels: a problem whose reference is cuBLASLt's result on `rt`'s GPU (the same
  /// dtype, f32 accumulation) instead of Eigen's in f64 on the host: for shapes where the
  /// host reference would take minutes (8192^3 is 5.5e11 multiply-adds). Empty otherwise;
  /// kiln::Error(Unsupported) off CUDA.
  std::function<Problem(const Runtime& rt, const std::vector<int64_t>& shape, DType, uint64_t seed)> gpu_problem;
  /// The framework library's version of this kernel (kiln bench's `framework` route), enqueued
  /// on `stream` over the Problem's arguments, when a library has one and it is not a GEMM
  /// (the GEMMs' is cuBLASLt, chosen by kiln bench from the epilogue): cuDNN's fused attention
  /// (reference::gpu_attention_async) for the attention entries, with its padding mask
  /// (reference::gpu_attention_padded_async) for the padded ones, over ragged tensors
  /// (reference::gpu_attention_packed_async) for the packed ones. Empty otherwise.
  std::function<void(const Runtime& rt, const std::vector<TensorView>& args, void* stream)> framework;
  /// Where the framework's call depends on the shape (the packed entries: cuDNN's plan is
  /// made for a bound on the sequences' lengths, the shape's S), the route for problems of
  /// `shape`; `framework` then serves any shape (bounded by all the tokens). Empty
  /// otherwise. Use framework_for(), which picks.
  std::function<std::function<void(const Runtime&, const std::vector<TensorView>&, void*)>(
      const std::vector<int64_t>& shape)>
      framework_for_shape;
  /// Kernels specialised on some of the shape's dims (attention's head dim): the kernel for
  /// `shape` on `target` (Fingerprint::target: "sm_90a", ...; "" when unknown), whose tiles
  /// may differ per target; `make` gives the one for a default shape and target. Empty when
  /// every dim is a launch value. Use kernel_for(), which picks.
  std::function<Kernel(DType, const std::vector<int64_t>& shape, const std::string& target)> make_for_shape;
  /// With make_for_shape: a name for what the kernel is specialised on ("D=128"); kernels
  /// of equal names serve the same shapes.
  std::function<std::string(const std::vector<int64_t>& shape)> specialisation;
};

/// The entry's kernel for problems of `shape` on `target` (the runtime's
/// `fingerprint().target`; "" for any): make_for_shape's where the entry has it, else
/// make's (which serves every shape and target).
KILN_API Kernel kernel_for(const Entry& entry, DType dtype, const std::vector<int64_t>& shape,
                           const std::string& target = "");

/// The entry's framework route for problems of `shape`: framework_for_shape's where the
/// entry has it, else `framework` (empty when the entry has none).
KILN_API std::function<void(const Runtime&, const std::vector<TensorView>&, void*)>
framework_for(const Entry& entry, const std::vector<int64_t>& shape);

KILN_API const std::vector<Entry>& all();
/// Throws kiln::Error(NotFound) listing the catalogue when `name` is unknown.
KILN_API const Entry& find(const std::string& name);
/// "257x129x65" -> {257, 129, 65}; throws kiln::Error(InvalidArgument) naming the rule.
KILN_API std::vector<int64_t> parse_shape(const std::string& text, const Entry& entry);

struct KILN_API RunResult {
  verify::Report report; ///< the verdict: the first failing output's report, else the first output's
  std::vector<verify::Report> outputs; ///< every output's (more than one: attention's LSE)
  double trace_ms = 0;  ///< building the tile IR from the DSL
  CompileTimes compile; ///< the compile that produced the code (a cache hit: the original's)
  CacheInfo cache;      ///< what this compile call did: miss, memory or disk hit, and its cost
  KernelReport kernel;  ///< registers, shared memory, target
  std::string launch_path; ///< which machine code ran (CompiledKernel::launch_path)
  double run_ms = 0;    ///< first run, on the host clock (warm timing is `kiln bench`)
  double flops = 0;
  std::string shape;
  uint64_t seed = 0;
};

/// Trace, compile, make a fresh random problem, poison the output, run, verify.
KILN_API RunResult run_and_verify(const Runtime& rt, const Entry& entry,
                                  const std::vector<int64_t>& shape, DType dtype, uint64_t seed);

} // namespace kiln::catalogue
