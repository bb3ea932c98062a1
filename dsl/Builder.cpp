// The DSL front end: each call builds one tile op at the current insertion point and
// checks it at once, so a mistake is reported at the C++ line that made it.
#include "kiln/dsl.hpp"
#include "Runtime/Throw.h"

#include "Compiler/KernelImpl.h"
#include "Dialect/Tile/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

#include <atomic>

using namespace mlir;
namespace t = kiln::tile;
static_assert(kiln::dsl::kMaxTileElements == kiln::tile::kMaxTileElements, "one limit, two spellings");

namespace kiln::dsl {

struct BuilderState {
  /// This trace's id, carried by every handle it makes (never 0, never reused).
  const uint64_t serial;
  std::shared_ptr<detail::KernelImpl> impl;
  OpBuilder b;
  t::KernelOp kernel;
  detail::DiagnosticCollector diags;
  std::vector<Attribute> argNames;
  llvm::SmallVector<bool> outputs;
  llvm::SmallVector<int64_t> inPlace; // (output, input) pairs: allow_in_place
  std::vector<Where> inPlaceSites;     // the user's allow_in_place call of each pair

  explicit BuilderState(std::shared_ptr<detail::KernelImpl> k)
      : serial(nextSerial()), impl(std::move(k)), b(impl->ctx.get()), diags(impl->ctx.get()) {}
  static uint64_t nextSerial() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
  }

  std::string name() { return kernel ? kernel.getSymName().str() : "?"; }
  Location loc(const Where& w) {
    return FileLineColLoc::get(b.getContext(), w.file_name(), w.line(), w.column());
  }
  const Where* site = nullptr; ///< the user's call being traced, for error messages
  [[noreturn]] void fail(const std::string& msg) {
    std::string at;
    if (site) at = " (at " + std::string(site->file_name()) + ":" + std::to_string(site->line()) + ")";
    kiln::detail::throwError(ErrorKind::InvalidKernel, "kernel '" + name() + "': " + msg + at);
  }
  /// Verifies one freshly built op (not its regions) and turns diagnostics into an Error.
  template <typename Op>
  Op check(Op op) {
    if (failed(mlir::verify(op.getOperation(), /*verifyRecursively=*/false))) {
      std::string d = diags.take();
      op.getOperation()->erase();
      fail(d);
    }
    return op;
  }
  Type elt(DType d) {
    switch (d) {
    case DType::f32: return b.getF32Type();
    case DType::f16: return b.getF16Type();
    case DType::bf16: return b.getBF16Type();
    case DType::i32: return b.getIntegerType(32);
    }
    return b.getF32Type();
  }
  Location siteLoc() { return site ? loc(*site) : Location(NameLoc::get(b.getStringAttr(name()))); }
  /// Types are built checked: an unsupported shape fails here, at the user's call.
  t::TileType tileType(const Shape& s, DType d) {
    auto tt = t::TileType::getChecked([&] { return emitError(siteLoc()); }, b.getContext(),
                                      ArrayRef<int64_t>(s), elt(d));
    if (!tt) fail(diags.take());
    return tt;
  }
  t::ViewType viewType(const Shape& s, DType d) {
    auto vt = t::ViewType::getChecked([&] { return emitError(siteLoc()); }, b.getContext(),
                                      ArrayRef<int64_t>(s), elt(d));
    if (!vt) fail(diags.take());
    return vt;
  }
  Tile wrap(Value v, Shape s, DType d) { return Tile(serial, v.getAsOpaquePointer(), std::move(s), d); }
  Tile wrapLike(Value v, const Tile& like) { return wrap(v, like.shape(), like.dtype()); }
  Index wrap(Value v) { return Index(serial, v.getAsOpaquePointer()); }
};

namespace {
/// The trace running on this thread (kernel() sets it around the user's body; a trace
/// inside a trace restores the outer one when it ends).
thread_local BuilderState* tracing = nullptr;

/// The running trace, when `trace` is its id. Otherwise an InvalidKernel error naming the
/// handle (`what()` describes it: built only on failure). The handle's own pointers are
/// never followed before this check passes: its trace may be gone.
template <typename Describe>
BuilderState& live(uint64_t trace, Describe what, const Where* w = nullptr) {
  BuilderState* s = tracing;
  if (trace != 0 && s && s->serial == trace) return *s;
  if (s && w) s->site = w; // the running trace's error names the user's line
  if (trace == 0) kiln::detail::throwError(ErrorKind::InvalidKernel, "use of an empty " + what() + " (default-constructed)");
  const std::string rule = ": tiles, indexes, views, argument tensors and the Builder belong to the kernel() "
                           "trace that made them (keep them inside its body)";
  if (!s) kiln::detail::throwError(ErrorKind::InvalidKernel, what() + " is used outside the trace that made it (that kernel() "
                                                          "call has returned or thrown, or runs on another thread)" + rule);
  s->fail(what() + " was made while tracing another kernel" + rule);
}
} // namespace

namespace {
/// Marks the DSL call being traced so a failure names the user's source line.
/// (nullptr marks a call with no source line, e.g. an operator: better no line than the
/// line of an enclosing grid or loop.)
struct SiteGuard {
  BuilderState& s;
  const Where* saved;
  SiteGuard(BuilderState& st, const Where& w) : SiteGuard(st, &w) {}
  SiteGuard(BuilderState& st, const Where* w) : s(st), saved(st.site) { s.site = w; }
  ~SiteGuard() { s.site = saved; }
};
BuilderState& st(const Tile& x, const Where* w = nullptr) { return live(x.trace(), [&] { return "Tile " + x.str(); }, w); }
BuilderState& st(const Index& x, const Where* w = nullptr) { return live(x.trace(), [] { return std::string("Index"); }, w); }
BuilderState& st(const View& x, const Where* w = nullptr) {
  return live(x.trace(), [&] { return "View " + Tile(0, nullptr, x.shape(), x.dtype()).str(); }, w);
}
Value val(void* p) { return Value::getFromOpaquePointer(p); }
Value val(const Tile& x) { return st(x), val(x.value()); }
Value val(const Index& x) { return st(x), val(x.value()); }
Value val(const View& x) { return st(x), val(x.value()); }
BuilderState& builder(uint64_t trace) { return live(trace, [] { return std::string("Builder"); }); }
} // namespace

std::string Tile::str() const {
  std::string s;
  for (int64_t d : shape_) s += std::to_string(d) + "x";
  return s + to_string(dtype_);
}

// ---- Index arithmetic --------------------------------------------------------------

template <typename Op>
static Index indexBinary(Index a, Index b) {
  BuilderState& s = st(a);
  return s.wrap(s.b.create<Op>(s.b.getUnknownLoc(), val(a), val(b)).getResult());
}
Index operator+(Index a, Index b) { return indexBinary<arith::AddIOp>(a, b); }
Index operator-(Index a, Index b) { return indexBinary<arith::SubIOp>(a, b); }
Index operator*(Index a, Index b) { return indexBinary<arith::MulIOp>(a, b); }
Index operator+(Index a, int64_t b) { return a + Builder(st(a).serial).constant(b); }
Index operator*(Index a, int64_t b) { return a * Builder(st(a).serial).constant(b); }
Index cdiv(Index a, int64_t b) {
  BuilderState& s = st(a);
  if (b <= 0) s.fail("cdiv by " + std::to_string(b) + ": the tile size must be positive");
  Value c = s.b.create<arith::ConstantIndexOp>(s.b.getUnknownLoc(), b);
  return s.wrap(s.b.create<arith::CeilDivSIOp>(s.b.getUnknownLoc(), val(a), c).getResult());
}
Index operator/(Index a, int64_t b) {
  BuilderState& s = st(a);
  if (b <= 0) s.fail("index / " + std::to_string(b) + ": the divisor must be positive");
  Value c = s.b.create<arith::ConstantIndexOp>(s.b.getUnknownLoc(), b);
  return s.wrap(s.b.create<arith::FloorDivSIOp>(s.b.getUnknownLoc(), val(a), c).getResult());
}
Index operator/(Index a, Index b) {
  BuilderState& s = st(a);
  Location loc = s.b.getUnknownLoc();
  Value one = s.b.create<arith::ConstantIndexOp>(loc, 1);
  Value d = s.b.create<arith::MaxSIOp>(loc, val(b), one);
  return s.wrap(s.b.create<arith::FloorDivSIOp>(loc, val(a), d).getResult());
}
Index min(Index a, Index b) { return indexBinary<arith::MinSIOp>(a, b); }

// ---- Builder ----------------------------------------------------------------------

Index Builder::dim(const std::string& name) {
  auto& s = builder(trace_);
  if (name.empty()) s.fail("a dim symbol needs a name");
  return s.wrap(s.b.create<t::DimOp>(s.b.getUnknownLoc(), name).getResult());
}

Index Builder::constant(int64_t v) {
  auto& s = builder(trace_);
  return s.wrap(s.b.create<arith::ConstantIndexOp>(s.b.getUnknownLoc(), v).getResult());
}

Tensor Builder::input(const std::string& name, std::vector<Dim> dims, DType dtype, Where w) {
  return arg(name, std::move(dims), dtype, false, w);
}
Tensor Builder::output(const std::string& name, std::vector<Dim> dims, DType dtype, Where w) {
  return arg(name, std::move(dims), dtype, true, w);
}

Tensor Builder::arg(const std::string& name, std::vector<Dim> dims, DType dtype, bool output,
                    Where w) {
  auto& s = builder(trace_);
  SiteGuard site(s, w);
  if (name.empty()) s.fail("an argument needs a name");
  for (Attribute a : s.argNames)
    if (cast<StringAttr>(a).getValue() == name) s.fail("argument name '" + name + "' is used twice");
  if (dims.empty()) s.fail("argument '" + name + "' needs at least one dim");
  if (output && dtype == DType::i32)
    s.fail("output '" + name + "' is i32: outputs are f32, f16 or bf16 (i32 is for inputs read with Builder::read)");
  SmallVector<Attribute> ds;
  for (const Dim& d : dims) {
    if (d.is_symbol()) {
      auto op = val(d.symbol()).getDefiningOp<t::DimOp>();
      if (!op) s.fail("argument '" + name + "': a dim must be a symbol from dims() or a constant");
      ds.push_back(s.b.getStringAttr(op.getSymbol()));
    } else {
      if (d.extent() < 0) s.fail("argument '" + name + "': dim must be >= 0");
      ds.push_back(s.b.getI64IntegerAttr(d.extent()));
    }
  }
  auto type = t::TensorArgType::getChecked([&] { return emitError(s.loc(w)); }, s.b.getContext(),
                                           s.b.getArrayAttr(ds), s.elt(dtype));
  if (!type) s.fail("argument '" + name + "': " + s.diags.take());
  Block& body = s.kernel.getBody().front();
  unsigned index = body.getNumArguments();
  body.addArgument(type, s.loc(w));
  s.argNames.push_back(s.b.getStringAttr(name));
  s.outputs.push_back(output);
  // Kept current while tracing: op verifiers (e.g. a store into an 'in' argument) read them.
  s.kernel.setArgNamesAttr(s.b.getArrayAttr(s.argNames));
  s.kernel.setOutputsAttr(s.b.getDenseBoolArrayAttr(s.outputs));
  return Tensor(s.serial, index, dtype, dims.size());
}

void Builder::allow_in_place(const Tensor& output, const Tensor& input, Where w) {
  auto& s = builder(trace_);
  SiteGuard site(s, w);
  live(output.trace(), [] { return std::string("Tensor (allow_in_place's output)"); });
  live(input.trace(), [] { return std::string("Tensor (allow_in_place's input)"); });
  const unsigned o = output.position(), i = input.position();
  auto name = [&](unsigned a) { return "'" + cast<StringAttr>(s.argNames[a]).getValue().str() + "'"; };
  if (!s.outputs[o] || s.outputs[i])
    s.fail("allow_in_place(output, input) takes an output, then an input; got " + name(o) +
           (s.outputs[o] ? " (out)" : " (in)") + " and " + name(i) + (s.outputs[i] ? " (out)" : " (in)"));
  Block& body = s.kernel.getBody().front();
  if (body.getArgument(o).getType() != body.getArgument(i).getType())
    s.fail("allow_in_place: " + name(o) + " can never be the same memory as " + name(i) +
           ": their dims or dtypes differ");
  for (size_t p = 0; p < s.inPlace.size(); p += 2)
    if (s.inPlace[p] == o && s.inPlace[p + 1] == i) return; // declared already
  s.inPlace.push_back(o);
  s.inPlace.push_back(i);
  s.inPlaceSites.push_back(w);
  s.kernel.setInPlaceAttr(s.b.getDenseI64ArrayAttr(s.inPlace));
}

void Builder::grid_impl(const std::vector<Index>& sizes,
                        const std::function<void(const std::vector<Index>&)>& body, Where w) {
  auto& s = builder(trace_);
  SiteGuard site(s, w);
  if (sizes.empty() || sizes.size() > 3)
    s.fail("grid must have 1, 2 or 3 dims, got " + std::to_string(sizes.size()));
  if (s.b.getInsertionBlock() != &s.kernel.getBody().front())
    s.fail("grid must be at the top level of the kernel, not nested");
  SmallVector<Value> vs;
  for (const Index& i : sizes) vs.push_back(val(i));
  auto g = s.b.create<t::GridOp>(s.loc(w), vs);
  OpBuilder::InsertionGuard guard(s.b);
  Block& blk = g.getBody().front();
  s.b.setInsertionPoint(blk.getTerminator());
  std::vector<Index> ivs;
  for (BlockArgument a : blk.getArguments()) ivs.push_back(s.wrap(a));
  SiteGuard inBody(s, nullptr); // the user's body reports its own lines
  body(ivs);
}

View Tensor::tile(std::vector<Index> index, Shape shape, Where w) const {
  auto& s = live(trace_, [&] { return "Tensor (argument #" + std::to_string(arg_) + ")"; });
  SiteGuard site(s, w);
  std::string who = "argument '" + cast<StringAttr>(s.argNames.at(arg_)).getValue().str() + "'";
  if (index.size() != rank_ || shape.empty() || shape.size() > rank_)
    s.fail(who + " has rank " + std::to_string(rank_) + ": tile() needs " + std::to_string(rank_) +
           " indices (element indices for the leading dims a smaller tile fixes, then tile indices) and a tile of rank 1 to " +
           std::to_string(rank_) + ", got " + std::to_string(index.size()) + " indices and a rank-" +
           std::to_string(shape.size()) + " tile");
  for (int64_t d : shape)
    if (d <= 0) s.fail(who + ": tile dims must be positive");
  if (dtype_ == DType::i32)
    s.fail(who + " is i32: tiles are f32, f16 or bf16; read its elements one at a time with Builder::read");
  const int64_t lead = int64_t(rank_) - int64_t(shape.size());
  if (windowDim_ >= 0 && windowDim_ < lead)
    s.fail(who + " has a window along dim " + std::to_string(windowDim_) + ", which this rank-" +
           std::to_string(shape.size()) + " tile fixes at an element index: window a dim the tile spans");
  SmallVector<Value> idx;
  for (const Index& i : index) idx.push_back(val(i));
  Value tensor = s.kernel.getBody().front().getArgument(arg_);
  auto vt = s.viewType(shape, dtype_);
  Value start, size;
  IntegerAttr along;
  if (windowDim_ >= 0) {
    start = val(windowStart_);
    size = val(windowLength_);
    along = s.b.getI64IntegerAttr(windowDim_);
  }
  auto op = s.check(s.b.create<t::ViewOp>(s.loc(w), vt, tensor, idx, start, size, along));
  return View(s.serial, op.getResult().getAsOpaquePointer(), shape, dtype_);
}

Tensor Tensor::window(int64_t dim, Index start, Index length, Where w) const {
  auto& s = live(trace_, [&] { return "Tensor (argument #" + std::to_string(arg_) + ")"; });
  SiteGuard site(s, w);
  std::string who = "window of argument '" + cast<StringAttr>(s.argNames.at(arg_)).getValue().str() + "'";
  if (windowDim_ >= 0) s.fail(who + ": it has a window already (along dim " + std::to_string(windowDim_) + "); one per tensor");
  if (dtype_ == DType::i32) s.fail(who + ": it is i32, read one element at a time with Builder::read; windows are for tiles");
  if (dim < 0 || dim >= int64_t(rank_) - 1)
    s.fail(who + " along dim " + std::to_string(dim) + ": it has rank " + std::to_string(rank_) + ", and a window is along " +
           (rank_ < 2 ? std::string("a dim other than the innermost, which a rank-1 tensor lacks")
                      : "dim 0" + (rank_ > 2 ? " to " + std::to_string(rank_ - 2) : std::string()) +
                            " (not the innermost: its rows keep their alignment)"));
  (void)val(start);
  (void)val(length);
  Tensor out = *this;
  out.windowDim_ = dim;
  out.windowStart_ = start;
  out.windowLength_ = length;
  return out;
}

Index Builder::read(const Tensor& t, std::vector<Index> at, Where w) {
  auto& s = builder(trace_);
  SiteGuard site(s, w);
  (void)live(t.trace(), [&] { return "Tensor (argument #" + std::to_string(t.position()) + ")"; });
  std::string who = "read of argument '" + cast<StringAttr>(s.argNames.at(t.position())).getValue().str() + "'";
  if (t.dtype() != DType::i32)
    s.fail(who + ": it is " + to_string(t.dtype()) + "; read() takes i32 inputs (load a float tensor into a tile)");
  Value tensor = s.kernel.getBody().front().getArgument(t.position());
  const int64_t rank = cast<t::TensorArgType>(tensor.getType()).getRank();
  if (int64_t(at.size()) != rank)
    s.fail(who + ": it has rank " + std::to_string(rank) + ", so read() needs " + std::to_string(rank) +
           " element indices, got " + std::to_string(at.size()));
  SmallVector<Value> idx;
  for (const Index& i : at) idx.push_back(val(i));
  auto op = s.check(s.b.create<t::ReadOp>(s.loc(w), s.b.getIndexType(), tensor, idx));
  return s.wrap(op.getResult());
}

Tile Builder::load(const View& v, double padding, Where w) {
  auto& s = builder(trace_);
  SiteGuard site(s, w);
  auto op = s.check(s.b.create<t::LoadOp>(s.loc(w), s.tileType(v.shape(), v.dtype()),
                                          val(v), s.b.getF64FloatAttr(padding)));
  return s.wrap(op.getResult(), v.shape(), v.dtype());
}

void Builder::store(const View& v, const Tile& x, Where w) {
  auto& s = builder(trace_);
  SiteGuard site(s, w);
  if (x.dtype() != v.dtype())
    s.fail("store of a " + x.str() + " tile into a " + to_string(v.dtype()) +
           " view: cast() it first");
  // An 'in' argument is read-only; the dialect verifier says so with its name.
  s.check(s.b.create<t::StoreOp>(s.loc(w), val(x), val(v)));
}

Tile Builder::zeros(Shape shape, DType dtype, Where w) { return full(std::move(shape), 0.0, dtype, w); }

Tile Builder::full(Shape shape, double value, DType dtype, Where w) {
  auto& s = builder(trace_);
  SiteGuard site(s, w);
  auto tt = s.tileType(shape, dtype);
  auto op = s.b.create<t::FullOp>(s.loc(w), tt, s.b.getF64FloatAttr(value));
  return s.wrap(op.getResult(), shape, dtype);
}

Tile Builder::splat(Index value, Shape shape, DType dtype, Where w) {
  auto& s = builder(trace_);
  SiteGuard site(s, w);
  auto tt = s.tileType(shape, dtype);
  auto op = s.check(s.b.create<t::SplatOp>(s.loc(w), tt, val(value)));
  return s.wrap(op.getResult(), shape, dtype);
}

Tile Builder::iota(Shape shape, int64_t dim, DType dtype, Where w) {
  auto& s = builder(trace_);
  SiteGuard site(s, w);
  auto tt = s.tileType(shape, dtype);
  if (dim < 0 || dim >= int64_t(shape.size()))
    s.fail("iota of " + Tile(0, nullptr, shape, dtype).str() + " along dim " + std::to_string(dim) + ": out of range");
  auto op = s.check(s.b.create<t::IotaOp>(s.loc(w), tt, s.b.getI64IntegerAttr(dim)));
  return s.wrap(op.getResult(), shape, dtype);
}

std::vector<Tile> Builder::loop(
    Index count, int64_t stages, const std::vector<Tile>& init,
    const std::function<std::vector<Tile>(Index, const std::vector<Tile>&)>& body, Where w) {
  auto& s = builder(trace_);
  SiteGuard site(s, w);
  if (stages < 1) s.fail("loop stages must be >= 1, got " + std::to_string(stages));
  SmallVector<Value> inits;
  for (const Tile& x : init) inits.push_back(val(x));
  auto op = s.b.create<t::LoopOp>(s.loc(w), val(count), inits, stages);
  std::vector<Tile> carried;
  for (auto [i, a] : llvm::enumerate(op.getCarried())) carried.push_back(s.wrapLike(a, init[i]));
  std::vector<Tile> next;
  {
    OpBuilder::InsertionGuard guard(s.b);
    s.b.setInsertionPointToEnd(&op.getBody().front());
    {
      SiteGuard inBody(s, nullptr); // the user's body reports its own lines
      next = body(s.wrap(op.getInductionVar()), carried);
    }
    if (next.size() != init.size())
      s.fail("loop carries " + std::to_string(init.size()) + " tiles but its body returned " +
             std::to_string(next.size()));
    SmallVector<Value> ys;
    for (size_t i = 0; i < next.size(); ++i) {
      if (next[i].shape() != init[i].shape() || next[i].dtype() != init[i].dtype())
        s.fail("loop carried tile #" + std::to_string(i) + " starts as " + init[i].str() +
               " but the body returns " + next[i].str());
      ys.push_back(val(next[i]));
    }
    s.b.create<t::YieldOp>(s.loc(w), ys);
  }
  std::vector<Tile> results;
  for (auto [i, r] : llvm::enumerate(op.getResults())) results.push_back(s.wrapLike(r, init[i]));
  return results;
}

Tile Builder::loop(Index count, int64_t stages, const Tile& init,
                   const std::function<Tile(Index, const Tile&)>& body, Where w) {
  return loop(count, stages, std::vector<Tile>{init},
              [&](Index k, const std::vector<Tile>& c) { return std::vector<Tile>{body(k, c[0])}; },
              w)[0];
}

// ---- Tile ops ---------------------------------------------------------------------

Tile dot(const Tile& a, const Tile& b, const Tile& acc, Where w) {
  auto& s = st(a, &w);
  SiteGuard site(s, w);
  if (a.shape().size() != 2 || b.shape().size() != 2 || acc.shape().size() != 2)
    s.fail("dot needs rank-2 tiles, got " + a.str() + ", " + b.str() + ", " + acc.str());
  if (a.shape()[1] != b.shape()[0])
    s.fail("dot: K of a (" + a.str() + ") does not match K of b (" + b.str() + ")");
  auto op = s.check(s.b.create<t::DotOp>(s.loc(w), s.tileType(acc.shape(), acc.dtype()), val(a),
                                         val(b), val(acc)));
  return s.wrapLike(op.getResult(), acc);
}

Tile cast(const Tile& x, DType to, Where w) {
  auto& s = st(x, &w);
  SiteGuard site(s, w);
  if (x.dtype() == to) return x;
  auto op = s.check(s.b.create<t::CastOp>(s.loc(w), s.tileType(x.shape(), to), val(x)));
  return s.wrap(op.getResult(), x.shape(), to);
}

Tile scale(const Tile& x, double factor, Where w) {
  auto& s = st(x, &w);
  SiteGuard site(s, w);
  auto op = s.check(s.b.create<t::ScaleOp>(s.loc(w), val(x), s.b.getF64FloatAttr(factor)));
  return s.wrapLike(op.getResult(), x);
}

template <typename Op>
static Tile unary(const Tile& x, const Where* w) {
  auto& s = st(x, w);
  SiteGuard site(s, w);
  auto op = s.check(s.b.create<Op>(s.siteLoc(), val(x)));
  return s.wrapLike(op.getResult(), x);
}
Tile exp(const Tile& x, Where w) { return unary<t::ExpOp>(x, &w); }
Tile exp2(const Tile& x, Where w) { return unary<t::Exp2Op>(x, &w); }
Tile log(const Tile& x, Where w) { return unary<t::LogOp>(x, &w); }
Tile sqrt(const Tile& x, Where w) { return unary<t::SqrtOp>(x, &w); }
Tile rsqrt(const Tile& x, Where w) { return unary<t::RsqrtOp>(x, &w); }
Tile tanh(const Tile& x, Where w) { return unary<t::TanhOp>(x, &w); }
Tile sigmoid(const Tile& x, Where w) { return unary<t::SigmoidOp>(x, &w); }
Tile relu(const Tile& x, Where w) { return unary<t::ReluOp>(x, &w); }
Tile gelu(const Tile& x, Where w) { return unary<t::GeluOp>(x, &w); }
Tile silu(const Tile& x, Where w) { return unary<t::SiluOp>(x, &w); }
Tile operator-(const Tile& x) { return unary<t::NegOp>(x, nullptr); }

template <typename Op>
static Tile binary(const Tile& a, const Tile& b, const char* what, const Where* w = nullptr) {
  auto& s = st(a, w);
  SiteGuard site(s, w);
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    s.fail(std::string(what) + " of " + a.str() + " and " + b.str() +
           ": tiles must match in shape and dtype (use rows()/cols() to broadcast a vector, "
           "cast() to change dtype)");
  auto op = s.check(s.b.create<Op>(s.siteLoc(), val(a), val(b)));
  return s.wrapLike(op.getResult(), a);
}
Tile operator+(const Tile& a, const Tile& b) { return binary<t::AddOp>(a, b, "add"); }
Tile operator-(const Tile& a, const Tile& b) { return binary<t::SubOp>(a, b, "sub"); }
Tile operator*(const Tile& a, const Tile& b) { return binary<t::MulOp>(a, b, "mul"); }
Tile operator/(const Tile& a, const Tile& b) { return binary<t::DivOp>(a, b, "div"); }
Tile max(const Tile& a, const Tile& b, Where w) { return binary<t::MaxOp>(a, b, "max", &w); }
Tile min(const Tile& a, const Tile& b, Where w) { return binary<t::MinOp>(a, b, "min", &w); }

Tile transpose(const Tile& x, Where w) {
  auto& s = st(x, &w);
  SiteGuard site(s, w);
  if (x.shape().size() != 2) s.fail("transpose of " + x.str() + ": needs a rank-2 tile");
  Shape out{x.shape()[1], x.shape()[0]};
  auto op = s.check(s.b.create<t::TransposeOp>(s.loc(w), s.tileType(out, x.dtype()), val(x)));
  return s.wrap(op.getResult(), out, x.dtype());
}

static Tile compare(const Tile& a, const Tile& b, const char* pred, const char* what, const Where* w) {
  auto& s = st(a, w);
  SiteGuard site(s, w);
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    s.fail(std::string(what) + " of " + a.str() + " and " + b.str() +
           ": tiles must match in shape and dtype (cast() to change dtype, splat() or full() for a scalar)");
  auto op = s.check(s.b.create<t::CmpOp>(s.siteLoc(), s.b.getStringAttr(pred), val(a), val(b)));
  return s.wrapLike(op.getResult(), a);
}
Tile less(const Tile& a, const Tile& b, Where w) { return compare(a, b, "lt", "less", &w); }
Tile less_equal(const Tile& a, const Tile& b, Where w) { return compare(a, b, "le", "less_equal", &w); }
Tile greater(const Tile& a, const Tile& b, Where w) { return compare(a, b, "gt", "greater", &w); }
Tile greater_equal(const Tile& a, const Tile& b, Where w) { return compare(a, b, "ge", "greater_equal", &w); }
Tile equal(const Tile& a, const Tile& b, Where w) { return compare(a, b, "eq", "equal", &w); }
Tile not_equal(const Tile& a, const Tile& b, Where w) { return compare(a, b, "ne", "not_equal", &w); }

Tile where(const Tile& mask, const Tile& a, const Tile& b, Where w) {
  auto& s = st(mask, &w);
  SiteGuard site(s, w);
  st(a, &w), st(b, &w);
  if (mask.shape() != a.shape() || mask.shape() != b.shape() || mask.dtype() != a.dtype() || mask.dtype() != b.dtype())
    s.fail("where(" + mask.str() + ", " + a.str() + ", " + b.str() +
           "): the mask and both choices must match in shape and dtype");
  auto op = s.check(s.b.create<t::SelectOp>(s.loc(w), val(mask), val(a), val(b)));
  return s.wrapLike(op.getResult(), a);
}

static Tile broadcastAt(const Tile& x, const Shape& shape, ArrayRef<int64_t> dims, const Where* w) {
  auto& s = st(x, w);
  SiteGuard site(s, w);
  auto op = s.check(s.b.create<t::BroadcastOp>(s.siteLoc(), s.tileType(shape, x.dtype()), val(x),
                                               s.b.getDenseI64ArrayAttr(dims)));
  return s.wrap(op.getResult(), shape, x.dtype());
}
Tile broadcast(const Tile& x, Shape shape, std::vector<int64_t> dims, Where w) {
  return broadcastAt(x, shape, dims, &w);
}

static Tile expand(const Tile& a, const Bcast& b, const char* what) {
  auto& s = st(a);
  if (a.shape().size() != 2 || b.v.shape().size() != 1)
    s.fail(std::string(what) + ": rows()/cols() broadcast a rank-1 tile against a rank-2 tile, got " +
           a.str() + " and " + b.v.str());
  if (b.v.shape()[0] != a.shape()[b.along])
    s.fail(std::string(what) + ": " + (b.along == 1 ? "rows(" : "cols(") + b.v.str() +
           ") needs length " + std::to_string(a.shape()[b.along]) + " to match " + a.str());
  return broadcastAt(b.v, a.shape(), {b.along}, s.site);
}
Tile operator+(const Tile& a, const Bcast& b) { return a + expand(a, b, "add"); }
Tile operator-(const Tile& a, const Bcast& b) { return a - expand(a, b, "sub"); }
Tile operator*(const Tile& a, const Bcast& b) { return a * expand(a, b, "mul"); }
Tile operator/(const Tile& a, const Bcast& b) { return a / expand(a, b, "div"); }

template <typename Op>
static Tile reduce(const Tile& x, int64_t dim, Where w) {
  auto& s = st(x, &w);
  SiteGuard site(s, w);
  if (x.shape().size() < 2) s.fail("reduce of " + x.str() + ": needs rank >= 2");
  if (dim < 0 || dim >= (int64_t)x.shape().size())
    s.fail("reduce of " + x.str() + " along dim " + std::to_string(dim) + ": out of range");
  Shape out = x.shape();
  out.erase(out.begin() + dim);
  auto op = s.check(s.b.create<Op>(s.loc(w), s.tileType(out, x.dtype()), val(x),
                                   s.b.getI64IntegerAttr(dim)));
  return s.wrap(op.getResult(), out, x.dtype());
}
Tile reduce_sum(const Tile& x, int64_t dim, Where w) { return reduce<t::ReduceSumOp>(x, dim, w); }
Tile reduce_max(const Tile& x, int64_t dim, Where w) { return reduce<t::ReduceMaxOp>(x, dim, w); }

// ---- Tracing ----------------------------------------------------------------------

Kernel kernel(const std::string& name, const std::function<void(Builder&)>& body) {
  if (name.empty()) kiln::detail::throwError(ErrorKind::InvalidKernel, "a kernel needs a name");
  auto impl = std::make_shared<detail::KernelImpl>();
  impl->ctx = detail::makeContext();
  BuilderState s(impl);
  struct Tracing { // this trace runs on this thread until kernel() returns or throws
    BuilderState* outer = tracing;
    explicit Tracing(BuilderState* s) { tracing = s; }
    ~Tracing() { tracing = outer; }
  } running(&s);
  Location loc = NameLoc::get(s.b.getStringAttr(name));
  impl->module = ModuleOp::create(loc);
  s.b.setInsertionPointToEnd(impl->module->getBody());
  s.kernel = s.b.create<t::KernelOp>(loc, name, s.b.getStrArrayAttr({}),
                                     s.b.getDenseBoolArrayAttr({}), /*in_place=*/nullptr);
  Block* blk = new Block();
  s.kernel.getBody().push_back(blk);
  s.b.setInsertionPointToEnd(blk);
  Builder k(s.serial);
  body(k);
  s.b.setInsertionPointToEnd(blk);
  s.b.create<t::ReturnOp>(loc);
  if (failed(mlir::verify(*impl->module))) s.fail("the traced tile IR does not verify:\n" + s.diags.take());
  impl->sig = detail::readSignature(*impl->module);
  // An output declared in place over an input a dot reads: the first such allow_in_place
  // call, named with its source line.
  for (size_t p = 0; p < s.inPlaceSites.size(); ++p) {
    const ArgSpec &out = impl->sig.args[s.inPlace[2 * p]], &in = impl->sig.args[s.inPlace[2 * p + 1]];
    if (!in.contracted) continue;
    s.site = &s.inPlaceSites[p];
    s.fail(detail::inPlaceOverDotError(out.name, in.name));
  }
  return Kernel(std::move(impl));
}

} // namespace kiln::dsl
