#include "CudnnGraph.h"

#include <limits>
#include <sstream>

#include "kiln/error.hpp"

namespace kiln::cuda::cudnn {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw Error(ErrorKind::InvalidArgument, "cuDNN attention: " + what);
}

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

const char* typeName(DataType t) {
  switch (t) {
  case kDataFloat: return "f32";
  case kDataHalf: return "f16";
  case kDataBfloat16: return "bf16";
  case kDataInt32: return "i32";
  case kDataBoolean: return "bool";
  }
  return "?";
}

const char* modeName(const OpSpec& op) {
  if (op.kind == OpKind::matmul) return "matmul";
  if (op.kind == OpKind::reduction) return op.mode == kReduceMax ? "reduce-max" : "reduce-add";
  switch (op.mode) {
  case kPwAdd: return "add";
  case kPwMul: return "mul";
  case kPwDiv: return "div";
  case kPwSub: return "sub";
  case kPwExp: return "exp";
  case kPwLog: return "log";
  case kPwCmpGe: return "cmp-ge";
  case kPwCmpLt: return "cmp-lt";
  case kPwLogicalAnd: return "and";
  case kPwGenIndex: return "gen-index";
  case kPwBinarySelect: return "select";
  }
  return "pointwise?";
}

// Builds the graph in order; uids from 100 on (past the user's, UserTensor) are handed out as
// tensors appear.
struct Builder {
  Graph g;
  int64_t next = 100;

  int64_t add(TensorSpec t) {
    if (t.uid == 0) t.uid = next++;
    g.tensors.push_back(std::move(t));
    return g.tensors.back().uid;
  }
  int64_t virt(const std::string& name, DataType type, std::vector<int64_t> dims, std::vector<int64_t> strides) {
    TensorSpec t;
    t.name = name;
    t.type = type;
    t.dims = std::move(dims);
    t.strides = std::move(strides);
    t.isVirtual = true;
    return add(std::move(t));
  }
  // A scalar passed by value: an f32 or (with `type` kDataInt32) an i32.
  int64_t scalar(const std::string& name, DataType type, float f32, int32_t i32 = 0) {
    TensorSpec t;
    t.name = name;
    t.type = type;
    t.dims = t.strides = {1, 1, 1, 1};
    t.byValue = true;
    t.f32 = f32;
    t.i32 = i32;
    return add(std::move(t));
  }
  int64_t scalarF32(const std::string& name, float value) { return scalar(name, kDataFloat, value); }
  int64_t scalarI32(const std::string& name, int32_t value) { return scalar(name, kDataInt32, 0, value); }
  void op(OpKind kind, const std::string& name, int mode, int64_t x, int64_t b, int64_t t, int64_t y,
          DataType compute = kDataFloat, int64_t axis = -1) {
    g.ops.push_back({kind, name, mode, axis, compute, x, b, t, y});
  }
};

DataType ioType(DType d) {
  if (d == DType::bf16) return kDataBfloat16;
  if (d == DType::f16) return kDataHalf;
  fail(std::string("Q, K, V and O must be bf16 or f16 (cuDNN's fused attention has no ") + to_string(d) + " kernel)");
}

void checkStrides(const char* name, const std::array<int64_t, 4>& s) {
  if (s[3] != 1) fail(std::string(name) + " must have inner stride 1 (cuDNN reads rows of D contiguous elements)");
  for (int64_t x : s)
    if (x < 0) fail(std::string(name) + " has a negative stride");
}

} // namespace

std::string AttentionShape::key() const {
  std::ostringstream out;
  out << to_string(dtype) << ' ' << B << 'x' << H << 'x' << G << 'x' << T << 'x' << S << 'x' << D;
  for (const auto* s : {&q, &k, &v, &o}) out << ' ' << (*s)[0] << ',' << (*s)[1] << ',' << (*s)[2] << ',' << (*s)[3];
  out << (causal ? " causal" : "") << (padded ? " padded" : "") << (ragged ? " ragged" : "") << (stats ? " stats" : "") << " scale=" << scale << " align=";
  for (int64_t a : alignment) out << a << ',';
  out << (maskWithLowest ? " lowest" : "");
  return out.str();
}

const TensorSpec& Graph::tensor(int64_t uid) const {
  for (const auto& t : tensors)
    if (t.uid == uid) return t;
  throw Error(ErrorKind::Runtime, "cuDNN attention graph (kiln bug): no tensor " + std::to_string(uid));
}

std::string Graph::describe() const {
  std::ostringstream out;
  auto name = [&](int64_t uid) {
    const TensorSpec& t = tensor(uid);
    std::string s = t.name + list(t.dims) + " " + typeName(t.type);
    if (t.ragged) s += " ragged by " + tensor(t.ragged).name;
    if (t.byValue) s += t.type == kDataInt32 ? "=" + std::to_string(t.i32) : "=" + std::to_string(t.f32);
    return s;
  };
  for (const OpSpec& op : ops) {
    out << modeName(op) << ' ' << op.name << ": " << name(op.x);
    if (op.b) out << (op.kind == OpKind::matmul ? " x " : ", ") << name(op.b);
    if (op.t) out << ", " << name(op.t);
    if (op.axis >= 0) out << " axis " << op.axis;
    out << " -> " << name(op.y);
    for (const auto& [dim, uid] : {std::pair{'M', op.mOverride}, {'N', op.nOverride}, {'K', op.kOverride}})
      if (uid) out << ' ' << dim << " <= " << name(uid);
    out << (op.zeroPadding ? ", zero past them" : "") << '\n';
  }
  return out.str();
}

Graph attentionGraph(const AttentionShape& a) {
  for (int64_t d : {a.B, a.H, a.G, a.T, a.S, a.D})
    if (d <= 0)
      fail("every dim must be positive, got B=" + std::to_string(a.B) + " H=" + std::to_string(a.H) +
           " G=" + std::to_string(a.G) + " T=" + std::to_string(a.T) + " S=" + std::to_string(a.S) +
           " D=" + std::to_string(a.D));
  if (a.H % a.G != 0)
    fail("the query heads H (" + std::to_string(a.H) + ") must be a multiple of the K/V heads G (" +
         std::to_string(a.G) + ")");
  if (a.T > a.S) fail("T = " + std::to_string(a.T) + " queries past S = " + std::to_string(a.S) + " keys");
  if (a.padded && a.T != a.S)
    fail("padded sequences need as many query rows as keys (T = " + std::to_string(a.T) + ", S = " +
         std::to_string(a.S) + "): each sequence's queries are its keys");
  if (a.padded && a.stats) fail("padded sequences with an LSE output are not supported");
  if (a.ragged && !a.padded) fail("packed (ragged) sequences need their lengths: a ragged shape is padded too");
  if (a.D % 8 != 0 || a.D > 256)
    fail("head dim D = " + std::to_string(a.D) + " (cuDNN's fused attention takes multiples of 8 up to 256)");
  checkStrides("Q", a.q);
  checkStrides("K", a.k);
  checkStrides("V", a.v);
  checkStrides("O", a.o);
  const DataType io = ioType(a.dtype);
  const int64_t B = a.B, H = a.H, T = a.T, S = a.S;

  Builder g;
  auto user = [&](int64_t uid, const char* name, DataType type, std::vector<int64_t> dims,
                  std::vector<int64_t> strides, int64_t alignment, int64_t ragged = 0) {
    TensorSpec t;
    t.uid = uid;
    t.name = name;
    t.type = type;
    t.dims = std::move(dims);
    t.strides = std::move(strides);
    t.alignment = alignment;
    t.ragged = ragged;
    return g.add(std::move(t));
  };
  // Packed: each tensor's sequence starts, in elements ([B + 1] as cuDNN takes them; the
  // last one the end), described before the tensor that names them.
  std::array<int64_t, 4> ragged{};
  if (a.ragged) {
    const std::array<std::pair<int64_t, const char*>, 4> offsets{
        {{kRaggedQ, "Q offsets"}, {kRaggedK, "K offsets"}, {kRaggedV, "V offsets"}, {kRaggedO, "O offsets"}}};
    for (size_t i = 0; i < 4; ++i)
      ragged[i] = user(offsets[i].first, offsets[i].second, kDataInt32, {B + 1, 1, 1, 1}, {1, 1, 1, 1}, a.alignment[5]);
  }
  const int64_t Q = user(kQ, "Q", io, {B, H, T, a.D}, {a.q[0], a.q[1], a.q[2], a.q[3]}, a.alignment[0], ragged[0]);
  // K^T [B,G,D,S]: K's memory read with its last two dims swapped.
  const int64_t Kt =
      user(kK, "K^T", io, {B, a.G, a.D, S}, {a.k[0], a.k[1], a.k[3], a.k[2]}, a.alignment[1], ragged[1]);
  const int64_t V = user(kV, "V", io, {B, a.G, S, a.D}, {a.v[0], a.v[1], a.v[2], a.v[3]}, a.alignment[2], ragged[2]);
  const int64_t O = user(kO, "O", io, {B, H, T, a.D}, {a.o[0], a.o[1], a.o[2], a.o[3]}, a.alignment[3], ragged[3]);

  // Each batch's sequence lengths, for the padding: [B,1,1,1] as cuDNN's overrides take them.
  int64_t lenQ = 0, lenKV = 0;
  if (a.padded) {
    lenQ = user(kSeqLenQ, "SeqLenQ", kDataInt32, {B, 1, 1, 1}, {1, 1, 1, 1}, a.alignment[5]);
    lenKV = user(kSeqLenKV, "SeqLenKV", kDataInt32, {B, 1, 1, 1}, {1, 1, 1, 1}, a.alignment[5]);
  }

  const std::vector<int64_t> scoreDims{B, H, T, S}, scoreStrides{H * T * S, T * S, S, 1};
  const std::vector<int64_t> rowDims{B, H, T, 1}, rowStrides{H * T, T, 1, 1};
  auto score = [&](const std::string& name, DataType type = kDataFloat) {
    return g.virt(name, type, scoreDims, scoreStrides);
  };

  const int64_t s0 = score("S");
  g.op(OpKind::matmul, "bmm1", 0, Q, Kt, 0, s0);
  if (a.padded) { // the scores of a sequence's rows and keys only; the rest read as 0
    g.g.ops.back().mOverride = lenQ, g.g.ops.back().nOverride = lenKV;
    g.g.ops.back().zeroPadding = true;
  }
  int64_t s = score("S*scale");
  g.op(OpKind::pointwise, "attn_scale", kPwMul, s0, g.scalarF32("scale", a.scale), 0, s);
  const float masked = a.maskWithLowest ? std::numeric_limits<float>::lowest()
                                        : -std::numeric_limits<float>::infinity();

  // Padding: keep (r, c) where r < SeqLenQ[b] and c < SeqLenKV[b], as the frontend writes it.
  if (a.padded) {
    const int64_t row = score("row", kDataInt32), col = score("col", kDataInt32);
    g.op(OpKind::pointwise, "gen_row_idx_padding", kPwGenIndex, s, 0, 0, row, kDataInt32, 2);
    g.op(OpKind::pointwise, "gen_col_idx_padding", kPwGenIndex, s, 0, 0, col, kDataInt32, 3);
    const int64_t inRow = score("row<SeqLenQ", kDataBoolean), inCol = score("col<SeqLenKV", kDataBoolean);
    g.op(OpKind::pointwise, "lt_row_sq_padding", kPwCmpLt, row, lenQ, 0, inRow, kDataBoolean);
    g.op(OpKind::pointwise, "lt_col_skv_padding", kPwCmpLt, col, lenKV, 0, inCol, kDataBoolean);
    const int64_t keep = score("in sequence", kDataBoolean);
    g.op(OpKind::pointwise, "and_row_col_padding", kPwLogicalAnd, inRow, inCol, 0, keep, kDataBoolean);
    const int64_t sp = score("S padded");
    g.op(OpKind::pointwise, "select_padding", kPwBinarySelect, s, g.scalarF32("masked", masked), keep, sp);
    s = sp;
  }

  // Causal: keep (r, c) where r + (S - T) >= c. One query row sees every key: no mask.
  if (a.causal && T > 1) {
    int64_t row = score("row", kDataInt32);
    g.op(OpKind::pointwise, "gen_row_index", kPwGenIndex, s, 0, 0, row, kDataFloat, 2);
    const int64_t col = score("col", kDataInt32);
    g.op(OpKind::pointwise, "gen_col_index", kPwGenIndex, s, 0, 0, col, kDataFloat, 3);
    if (T != S) { // bottom-right: row + S - T, as cuDNN's frontend writes it
      const int64_t plusS = score("row+S", kDataInt32);
      g.op(OpKind::pointwise, "row+skv", kPwAdd, row, g.scalarI32("S", int32_t(S)), 0, plusS, kDataInt32, 3);
      const int64_t minusT = score("row+S-T", kDataInt32);
      g.op(OpKind::pointwise, "row+skv-sq", kPwSub, plusS, g.scalarI32("T", int32_t(T)), 0, minusT, kDataInt32, 3);
      row = minusT;
    }
    const int64_t keep = score("keep", kDataBoolean);
    g.op(OpKind::pointwise, "row>=col", kPwCmpGe, row, col, 0, keep, kDataBoolean);
    const int64_t sm = score("S masked");
    g.op(OpKind::pointwise, "binary_select", kPwBinarySelect, s, g.scalarF32("masked", masked), keep, sm);
    s = sm;
  }

  const int64_t m = g.virt("max", kDataFloat, rowDims, rowStrides);
  g.op(OpKind::reduction, "max", kReduceMax, s, 0, 0, m);
  const int64_t z = score("S-max");
  g.op(OpKind::pointwise, "sub", kPwSub, s, m, 0, z);
  const int64_t e = score("exp");
  g.op(OpKind::pointwise, "exp", kPwExp, z, 0, 0, e);
  const int64_t l = g.virt("sum", kDataFloat, rowDims, rowStrides);
  g.op(OpKind::reduction, "sum", kReduceAdd, e, 0, 0, l);
  const int64_t logl = g.virt("log(sum)", kDataFloat, rowDims, rowStrides);
  g.op(OpKind::pointwise, "log", kPwLog, l, 0, 0, logl);
  // The statistics are computed with or without an LSE to write (cuDNN's frontend builds
  // them into a virtual tensor for inference too: the engines match that graph).
  const int64_t stats = a.stats ? user(kStats, "LSE", kDataFloat, rowDims, rowStrides, a.alignment[4])
                                : g.virt("stats", kDataFloat, rowDims, rowStrides);
  g.op(OpKind::pointwise, "add", kPwAdd, m, logl, 0, stats);
  const int64_t p = score("P", io); // the second product's A operand is of the inputs' type
  g.op(OpKind::pointwise, "div", kPwDiv, e, l, 0, p);
  g.op(OpKind::matmul, "bmm2", 0, p, V, 0, O);
  if (a.padded) g.g.ops.back().mOverride = lenQ, g.g.ops.back().kOverride = lenKV;
  return g.g;
}

} // namespace kiln::cuda::cudnn
