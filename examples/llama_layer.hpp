// kiln-llama's parts: the layer's shape and weights, the two paths that run it (kiln's
// kernels; the framework's library calls and elementwise kernels) and the f64 reference.
// Shared by llama_layer.cpp (the program), llama_paths.cpp and llama_model.cpp (the model and
// its reference).
#pragma once
#include <kiln/kiln.hpp>

#include <functional>
#include <string>
#include <vector>

namespace llama {

/// One decoder layer's work. Prefill: `batch` sequences of `tokens` new tokens each, nothing
/// cached. Decode: `batch` sequences of one new token each (tokens = 1) after `cached`
/// positions already in the K/V cache. Rows of X, QKV, A, ... are the batch's tokens, sequence
/// by sequence (row b * tokens + t).
struct Shape {
  int64_t batch = 1, tokens = 1, cached = 0;
  int64_t hidden = 0, heads = 0, kvHeads = 0, mlp = 0;
  int64_t hd() const { return hidden / heads; }
  int64_t rows() const { return batch * tokens; }
  int64_t qkv() const { return (heads + 2 * kvHeads) * hd(); }
  /// Positions a sequence spans after this step: the K/V cache's length and the RoPE tables'.
  int64_t positions() const { return cached + tokens; }
  bool decode() const { return cached > 0; }
  std::string describe() const; ///< "prefill B1xT2048 D4096 H32/8 F14336"
  std::string key() const;      ///< the rows' shape column: "B1xT2048xL0xD4096xH32xG8xF14336"
  /// Multiply-adds x 2 of the layer (the causal attention's half square counted).
  double flops() const;
};

/// The layer's parameters and input on the host (the engine's copy). Decode also has the
/// cache's contents before this step: K and V [batch, G, positions, hd], the last position
/// (the new token's) left for the step to write.
struct Host {
  kiln::HostTensor x, wqkv, wo, wg, wu, wd, w1, w2, cos, sin, pos, kCache, vCache;
};
Host make_host(const Shape& s, kiln::DType dt);

/// A stage of the layer as one path runs it (one or more launches on the legacy stream).
struct Step {
  std::string stage; ///< "attn_norm", "qkv", "rope", "attention", "o_proj", "mlp_norm", "gate_up", "down"
  std::function<void()> run;
};

/// One way of running the layer, with its own runtime (its memory counted apart).
struct Path {
  Path(std::string n, kiln::Backend b) : name(std::move(n)), rt(kiln::Runtime::create(b)) {}
  std::string name;
  kiln::Runtime rt;
  double import_ms = 0;  ///< what a framework ships built: its elementwise kernels' NVRTC compile
  double compile_ms = 0; ///< kiln's kernels, compiled on first use
  std::vector<Step> steps;
  std::vector<kiln::DeviceTensor> memory; ///< everything the steps touch, kept alive
  kiln::DeviceTensor y;                   ///< the layer's output [rows, hidden]
  void run() const {
    for (const Step& s : steps) s.run();
  }
};

/// kiln's path: catalogue kernels (rmsnorm, gemm, rope, attention over views, gemm with the
/// residual fused, swiglu) and, in decode, the engine's own DSL kernel that rotates the new
/// K into the cache beside V's copy.
void build_kiln(Path& p, const Shape& s, const Host& h, kiln::DType dt);
/// The framework's path (CUDA only): cuBLASLt GEMMs (the residual as its C; gate and up as one
/// GEMM over [Wg | Wu]), cuDNN's fused attention over the same views, and separate elementwise
/// kernels compiled with NVRTC (RMSNorm, RoPE, the K/V cache write, SiLU-and-multiply).
void build_framework(Path& p, const Shape& s, const Host& h, kiln::DType dt);

/// The layer's output rows [first, first + n) of sequence `seq` (n <= tokens) in f64, each
/// step from kiln::reference with f32 rounding in between. Exact for a prefix of a sequence:
/// attention is causal, so those rows see nothing after them.
std::vector<double> reference(const Shape& s, const Host& h, int64_t seq, int64_t n);

/// A host tensor's view (HostTensor::view() is not const; the views here are only read).
inline kiln::TensorView view_of(const kiln::HostTensor& t) { return const_cast<kiln::HostTensor&>(t).view(); }

/// View helpers over a token-major [rows, cols] buffer: columns col0 .. col0 + heads*hd as
/// [batch, heads, tokens, hd] (attention's layout) or [rows, heads, hd] (rope's).
kiln::TensorView heads_view(const kiln::TensorView& base, int64_t batch, int64_t col0, int64_t heads, int64_t hd);
kiln::TensorView tokens_view(const kiln::TensorView& base, int64_t col0, int64_t heads, int64_t hd);
/// A cache [batch, G, P, hd] as attention reads it (the first `len` positions), or the
/// position `at` of every sequence as [batch, G, hd] (where a step writes its new token).
kiln::TensorView cache_prefix(const kiln::TensorView& cache, int64_t len);
kiln::TensorView cache_slot(const kiln::TensorView& cache, int64_t at);

} // namespace llama
