#pragma once
// kiln's tile DSL. A kernel is a C++ function that, when traced, builds tile IR:
//
//   Kernel gemm_relu(Tiles t) {
//     return kernel("gemm_relu", [=](Builder& k) {
//       auto [M, N, K] = k.dims("M", "N", "K");
//       auto A = k.input("A", {M, K}, bf16), B = k.input("B", {K, N}, bf16);
//       auto C = k.output("C", {M, N}, bf16);
//       k.grid({cdiv(M, t.m), cdiv(N, t.n)}, [&](Index i, Index j) { ... });
//     });
//   }
//
// Tile sizes are plain C++ integers (compile-time constants of the kernel); M, N, K are
// symbolic Index values (runtime), so one compiled kernel serves every shape.
// Mistakes (a dot with mismatched K, a store of the wrong dtype) throw kiln::Error
// naming the kernel, the op and the rule, with the C++ source line of the call (operators
// such as `a + b` cannot carry a source line; their errors name the op and the tiles).
#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <source_location>
#include <string>
#include <vector>

#include "kiln/dtype.hpp"
#include "kiln/export.hpp"
#include "kiln/kernel.hpp"

namespace kiln::dsl {

inline constexpr DType f32 = DType::f32;
inline constexpr DType f16 = DType::f16;
inline constexpr DType bf16 = DType::bf16;
inline constexpr DType i32 = DType::i32;
using Shape = std::vector<int64_t>;
/// The most elements one tile may have (2^20): a tile lives in a program's registers or
/// shared memory, far smaller; a larger tile() or full() is an InvalidKernel error at the
/// call that makes it.
inline constexpr int64_t kMaxTileElements = int64_t(1) << 20;
using Where = std::source_location;

class Builder;

// Handles (Index, Tile, View, Tensor, the Builder) belong to the trace that made them: they
// carry its id, and every DSL call checks it against the trace running on the calling
// thread. One kept past its kernel() call, or carried into another kernel's trace, is an
// InvalidKernel error naming it, never a read of the finished trace's memory.

/// A scalar index (a dim, a tile index, a grid size): a runtime value in the kernel.
class KILN_API Index {
public:
  Index() = default;
  Index(uint64_t trace, void* v) : trace_(trace), v_(v) {}
  /// The trace that made it (0: default-constructed, no trace).
  uint64_t trace() const { return trace_; }
  void* value() const { return v_; }
  friend KILN_API Index operator+(Index a, Index b);
  friend KILN_API Index operator-(Index a, Index b);
  friend KILN_API Index operator*(Index a, Index b);
  friend KILN_API Index operator+(Index a, int64_t b);
  friend KILN_API Index operator*(Index a, int64_t b);
  /// floor(a / b), b > 0: e.g. the K/V head a query head h shares, h / group (GQA).
  friend KILN_API Index operator/(Index a, int64_t b);
  /// floor(a / b) for b >= 1, both runtime values: e.g. the query heads per K/V head, H / G.
  /// A divisor below 1 divides by 1 (a kernel must not trap its host process on a zero).
  friend KILN_API Index operator/(Index a, Index b);
  /// The smaller of a and b: e.g. a causal loop's bound, min(cdiv(S, t), i + 1).
  friend KILN_API Index min(Index a, Index b);
private:
  uint64_t trace_ = 0;
  void* v_ = nullptr;
};
/// ceil(a / b): the number of tiles of size b covering a.
KILN_API Index cdiv(Index a, int64_t b);

/// A value-semantics tile: static shape, one dtype.
class KILN_API Tile {
public:
  Tile() = default;
  Tile(uint64_t trace, void* v, Shape shape, DType dtype)
      : trace_(trace), v_(v), shape_(std::move(shape)), dtype_(dtype) {}
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  uint64_t trace() const { return trace_; }
  void* value() const { return v_; }
  std::string str() const; ///< "128x64xbf16"
private:
  uint64_t trace_ = 0;
  void* v_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::f32;
};

/// A rank-1 tile marked for broadcasting inside a binary op. rows(v): v runs along the
/// columns and is repeated for every row (a bias row). cols(v): v runs along the rows
/// and is repeated for every column (a per-row statistic, e.g. a softmax max).
struct Bcast {
  Tile v;
  int64_t along; ///< the result dim that v's elements run along
};
inline Bcast rows(Tile v) { return {std::move(v), 1}; }
inline Bcast cols(Tile v) { return {std::move(v), 0}; }

/// The tile-sized window of a tensor at a tile index (masked at ragged edges).
class KILN_API View {
public:
  View() = default;
  View(uint64_t trace, void* v, Shape shape, DType dtype)
      : trace_(trace), v_(v), shape_(std::move(shape)), dtype_(dtype) {}
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  uint64_t trace() const { return trace_; }
  void* value() const { return v_; }
private:
  uint64_t trace_ = 0;
  void* v_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::f32;
};

/// A dim of a kernel argument: a symbolic Index from Builder::dims, or a constant.
class KILN_API Dim {
public:
  Dim(Index symbol) : symbol_(symbol) {}
  Dim(int64_t extent) : extent_(extent) {}
  Dim(int extent) : extent_(extent) {}
  const Index& symbol() const { return symbol_; }
  int64_t extent() const { return extent_; }
  bool is_symbol() const { return symbol_.value() != nullptr; }
private:
  Index symbol_;
  int64_t extent_ = -1;
};

/// A kernel argument.
class KILN_API Tensor {
public:
  Tensor() = default;
  Tensor(uint64_t trace, unsigned arg, DType dtype, size_t rank)
      : trace_(trace), arg_(arg), dtype_(dtype), rank_(rank) {}
  /// The window of `shape` at tile index `index` (tile units, not elements). A tile of
  /// fewer dims than the tensor fixes its leading dims: their indices are element indices
  /// and the rest tile indices, so Q of [B, H, S, D] gives head h of batch b's rows by
  /// `Q.tile({b, h, i, k.constant(0)}, {64, D})` (masked off whole where b or h is past its
  /// dim).
  View tile(std::vector<Index> index, Shape shape, Where w = Where::current()) const;
  /// This tensor with dim `dim` narrowed to elements [start, start + length), clipped to
  /// the dim: tiles of the result count from `start` along `dim`, and loads and stores
  /// through them are masked past `length` (none where start is past the dim or length is
  /// not positive). For sequences packed end to end, their offsets in an i32 input:
  ///   auto at = k.read(Offsets, {n}), len = k.read(Offsets, {n + 1}) - at;  // Offsets: [B + 1]
  ///   Q.window(1, at, len).tile({h, i, z}, {64, D});    // Q: [H, T, D]: sequence n's rows
  /// The dim must be one the tile spans and not the innermost; one window per tensor.
  Tensor window(int64_t dim, Index start, Index length, Where w = Where::current()) const;
  DType dtype() const { return dtype_; }
  uint64_t trace() const { return trace_; }
  /// The argument's position in the kernel's signature.
  unsigned position() const { return arg_; }
private:
  uint64_t trace_ = 0;
  unsigned arg_ = 0;
  DType dtype_ = DType::f32;
  size_t rank_ = 0;
  int64_t windowDim_ = -1; ///< the windowed dim, or -1 (window())
  Index windowStart_, windowLength_;
};

class KILN_API Builder {
public:
  explicit Builder(uint64_t trace) : trace_(trace) {}
  uint64_t trace() const { return trace_; }

  /// Symbolic dims, bound at launch from the arguments that use them.
  template <typename... Names>
  std::array<Index, sizeof...(Names)> dims(Names... names) {
    return {dim(std::string(names))...};
  }
  Index dim(const std::string& name);
  Index constant(int64_t v);

  Tensor input(const std::string& name, std::vector<Dim> dims, DType dtype,
               Where w = Where::current());
  Tensor output(const std::string& name, std::vector<Dim> dims, DType dtype,
                Where w = Where::current());
  /// Declares that `output` may be written IN PLACE over `input`: a launch may then pass
  /// the very same view as both. The kernel promises that each element of `input` is read
  /// only by the program that writes that element of `output`, and before it writes it
  /// (elementwise and row-wise kernels: yes; a transpose, or any tile.dot operand: no).
  /// Without it, a launch refuses an output overlapping an input. Throws InvalidKernel
  /// when the two are not an output and an input of one type.
  void allow_in_place(const Tensor& output, const Tensor& input, Where w = Where::current());

  /// Runs `body` once per tile index of a 1-3 dim grid; body takes that many Index.
  template <typename F>
  void grid(std::vector<Index> sizes, F&& body, Where w = Where::current()) {
    grid_impl(sizes, [&](const std::vector<Index>& iv) {
      if constexpr (std::is_invocable_v<F, Index>) body(iv.at(0));
      else if constexpr (std::is_invocable_v<F, Index, Index>) body(iv.at(0), iv.at(1));
      else body(iv.at(0), iv.at(1), iv.at(2));
    }, w);
  }

  /// One element of an i32 input `t` at element indices `at` (one per dim), as an index:
  /// a per-sequence length or offset, for the program's loop bounds and masks (`k.splat`
  /// of it compares against `iota`). An index past its dim reads 0.
  ///   auto len = k.read(Lens, {b});                        // Lens: [B] i32
  ///   auto steps = min(cdiv(S, 64), cdiv(len, 64));        // keys past len are never read
  Index read(const Tensor& t, std::vector<Index> at, Where w = Where::current());
  Tile load(const View& v, double padding = 0.0, Where w = Where::current());
  void store(const View& v, const Tile& t, Where w = Where::current());
  Tile zeros(Shape shape, DType dtype = DType::f32, Where w = Where::current());
  Tile full(Shape shape, double value, DType dtype = DType::f32, Where w = Where::current());
  /// A tile filled with a runtime index value converted to float (e.g. 1/N needs N).
  Tile splat(Index value, Shape shape, DType dtype = DType::f32, Where w = Where::current());
  /// A tile whose every element is its own index along `dim` (0: its row, 1: its column),
  /// as a number: iota({2, 3}, 1) is {{0, 1, 2}, {0, 1, 2}}. Exact while the extent along
  /// `dim` fits the dtype's significand (f32: 2^24, f16: 2048, bf16: 256; beyond, an
  /// InvalidKernel error). Add a tile's origin to get positions in the tensor:
  /// `k.iota({64, 64}, 0) + k.splat(i * 64, {64, 64})` holds each element's row.
  Tile iota(Shape shape, int64_t dim, DType dtype = DType::f32, Where w = Where::current());

  /// A sequential loop over 0..count carrying one tile; `stages` is how deep a GPU
  /// backend may pipeline its loads. body(k, carried) returns the next carried tile.
  Tile loop(Index count, int64_t stages, const Tile& init,
            const std::function<Tile(Index, const Tile&)>& body, Where w = Where::current());
  /// The same, carrying several tiles.
  std::vector<Tile> loop(Index count, int64_t stages, const std::vector<Tile>& init,
                         const std::function<std::vector<Tile>(Index, const std::vector<Tile>&)>& body,
                         Where w = Where::current());

private:
  void grid_impl(const std::vector<Index>& sizes,
                 const std::function<void(const std::vector<Index>&)>& body, Where w);
  Tensor arg(const std::string& name, std::vector<Dim> dims, DType dtype, bool output, Where w);
  uint64_t trace_;
};

/// Traces `body` into a kernel named `name`. Throws kiln::Error when the program is
/// malformed (the message names the kernel, the op and the rule, with the source line).
KILN_API Kernel kernel(const std::string& name, const std::function<void(Builder&)>& body);

// ---- Tile operations (destination-free, value semantics) --------------------------

/// acc + a @ b, accumulated in f32. a: MxK, b: KxN, acc: MxN f32.
KILN_API Tile dot(const Tile& a, const Tile& b, const Tile& acc, Where w = Where::current());
KILN_API Tile cast(const Tile& t, DType to, Where w = Where::current());
KILN_API Tile scale(const Tile& t, double factor, Where w = Where::current());
KILN_API Tile exp(const Tile& t, Where w = Where::current());
KILN_API Tile exp2(const Tile& t, Where w = Where::current());
KILN_API Tile log(const Tile& t, Where w = Where::current());
KILN_API Tile sqrt(const Tile& t, Where w = Where::current());
KILN_API Tile rsqrt(const Tile& t, Where w = Where::current());
KILN_API Tile tanh(const Tile& t, Where w = Where::current());
KILN_API Tile sigmoid(const Tile& t, Where w = Where::current());
KILN_API Tile relu(const Tile& t, Where w = Where::current());
KILN_API Tile gelu(const Tile& t, Where w = Where::current()); ///< tanh approximation
KILN_API Tile silu(const Tile& t, Where w = Where::current());
KILN_API Tile max(const Tile& a, const Tile& b, Where w = Where::current());
KILN_API Tile min(const Tile& a, const Tile& b, Where w = Where::current());
/// Reductions drop the reduced dim: reduce_sum(64x128, 1) is 64.
KILN_API Tile reduce_sum(const Tile& t, int64_t dim, Where w = Where::current());
KILN_API Tile reduce_max(const Tile& t, int64_t dim, Where w = Where::current());
inline Tile row_sum(const Tile& t, Where w = Where::current()) { return reduce_sum(t, 1, w); }
inline Tile row_max(const Tile& t, Where w = Where::current()) { return reduce_max(t, 1, w); }
/// A rank-2 tile with its dims swapped: transpose(t)(i, j) = t(j, i). `dot(q, transpose(k),
/// acc)` multiplies by K^T without a transposed copy of K in memory.
KILN_API Tile transpose(const Tile& t, Where w = Where::current());

// Masks. A comparison of two tiles of one shape and dtype yields a mask tile of the same
// shape and dtype: 1 where it holds, 0 where not (NaN compares false, but for not_equal, as
// C++'s float operators do). where() picks by a mask; a mask also multiplies (`m * x`).
// A causal mask over a 64 x 64 score tile at tile (i, j):
//   auto row = k.iota({64, 64}, 0) + k.splat(i * 64, {64, 64});
//   auto col = k.iota({64, 64}, 1) + k.splat(j * 64, {64, 64});
//   s = where(col <= row, s, k.full({64, 64}, -INFINITY));
KILN_API Tile less(const Tile& a, const Tile& b, Where w = Where::current());
KILN_API Tile less_equal(const Tile& a, const Tile& b, Where w = Where::current());
KILN_API Tile greater(const Tile& a, const Tile& b, Where w = Where::current());
KILN_API Tile greater_equal(const Tile& a, const Tile& b, Where w = Where::current());
KILN_API Tile equal(const Tile& a, const Tile& b, Where w = Where::current());
KILN_API Tile not_equal(const Tile& a, const Tile& b, Where w = Where::current());
/// a where `mask` is not 0, else b (NaN counts as not 0); all three of one shape and dtype.
KILN_API Tile where(const Tile& mask, const Tile& a, const Tile& b, Where w = Where::current());

/// Explicit broadcast: input dim i becomes result dim dims[i].
KILN_API Tile broadcast(const Tile& t, Shape shape, std::vector<int64_t> dims,
                        Where w = Where::current());

KILN_API Tile operator+(const Tile& a, const Tile& b);
KILN_API Tile operator-(const Tile& a, const Tile& b);
KILN_API Tile operator*(const Tile& a, const Tile& b);
KILN_API Tile operator/(const Tile& a, const Tile& b);
KILN_API Tile operator-(const Tile& a);
KILN_API Tile operator+(const Tile& a, const Bcast& b);
KILN_API Tile operator-(const Tile& a, const Bcast& b);
KILN_API Tile operator*(const Tile& a, const Bcast& b);
KILN_API Tile operator/(const Tile& a, const Bcast& b);
inline Tile operator+(const Bcast& a, const Tile& b) { return b + a; }
inline Tile operator*(const Bcast& a, const Tile& b) { return b * a; }
inline Tile operator<(const Tile& a, const Tile& b) { return less(a, b); }
inline Tile operator<=(const Tile& a, const Tile& b) { return less_equal(a, b); }
inline Tile operator>(const Tile& a, const Tile& b) { return greater(a, b); }
inline Tile operator>=(const Tile& a, const Tile& b) { return greater_equal(a, b); }
inline Tile operator*(const Tile& a, double f) { return scale(a, f); }
inline Tile operator*(double f, const Tile& a) { return scale(a, f); }

} // namespace kiln::dsl
