#include "hopper/AttentionMatch.h"
#include "hopper/MatchUtil.h"

#include "Transforms/ScalarMath.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <cmath>

namespace kiln::hopper {

using namespace mlir;
using namespace kiln::tile;

namespace {

/// Whether `v` (an index) is computed from `from`.
bool dependsOn(Value v, Value from) {
  if (v == from) return true;
  Operation* def = v.getDefiningOp();
  return def && llvm::any_of(def->getOperands(), [&](Value x) { return dependsOn(x, from); });
}

class Matcher {
public:
  Matcher(AttentionMatch& m, std::string& why) : m_(m), why_(why) {}

  bool fail(const std::string& s) {
    why_ = s;
    return false;
  }

  bool run(KernelOp k) {
    m_.kernel = k;
    GridLoopStore g;
    if (!matchGridLoopStore(k, 3, g, why_, /*maxStores=*/2, /*windows=*/true)) return false;
    m_.grid = g.grid, m_.loop = g.loop, m_.store = g.store;
    if (!g.more.empty()) { // O's (a 2-D tile) and a row value's (1-D), in either order
      m_.rowStore = g.more[0];
      if (cast<TileType>(m_.store.getValue().getType()).getRank() == 1) std::swap(m_.store, m_.rowStore);
    }
    if (!matchStore() || !matchRowStore() || !matchDots() || !matchWindows() || !matchOps()) return false;
    m_.noSplitWhy.clear();
    if (!matchSoftmaxState(m_.noSplitWhy)) m_.softmax.reset();
    m_.foldHeads = matchHeadGroups();
    return true;
  }

private:
  /// O[%b, %h, %i, 0] (rank 4) or O[%h, %i, 0] (rank 3) of 64 x D, and a grid of
  /// (ceildiv(S, 64), H, B) over O's dims (rank 3: B a dim of any argument, less a constant).
  bool matchStore() {
    auto view = m_.store.getView().getDefiningOp<ViewOp>();
    int o = view ? argOf(view, m_.kernel) : -1;
    if (o < 0) return fail("the store is not through a view of a kernel argument");
    m_.oArg = unsigned(o);
    TensorArgType ot = m_.kernel.getArgType(m_.oArg);
    auto vt = cast<ViewType>(view.getType());
    m_.rank = ot.getRank();
    if ((m_.rank != 3 && m_.rank != 4) || int64_t(view.getIndices().size()) != m_.rank || vt.getRank() != 2)
      return fail("O is not a 3-D or 4-D tensor written by 2-D tiles");
    if (!m_.kernel.isOutput(m_.oArg)) return fail("O is not an output");
    m_.inElt = ot.getElementType();
    if (!m_.inElt.isBF16() && !m_.inElt.isF16()) return fail("O is not bf16 or f16");
    m_.d = ot.getDimConstant(unsigned(m_.rank - 1));
    if (m_.d != 64 && m_.d != 128) return fail("the head dim is not a constant 64 or 128");
    if (vt.getShape()[0] != m_.rows || vt.getShape()[1] != m_.d)
      return fail("O's tile is not 64 rows by the whole head dim");
    Block& gb = m_.grid.getBody().front();
    auto idx = view.getIndices();
    const char* at = m_.rank == 4 ? "O is not written at (%b, %h, %i, 0) of grid indices"
                                  : "O is not written at (%h, %i, 0) of grid indices";
    m_.hIv = idx[m_.rank - 3], m_.iIv = idx[m_.rank - 2];
    if (m_.rank == 4) {
      m_.bIv = idx[0];
    } else { // the grid's third index: the sequence
      for (Value a : gb.getArguments())
        if (a != m_.hIv && a != m_.iIv) m_.bIv = a;
    }
    for (Value v : {m_.bIv, m_.hIv, m_.iIv})
      if (!v || !llvm::is_contained(gb.getArguments(), v)) return fail(at);
    if (m_.bIv == m_.hIv || m_.hIv == m_.iIv || m_.bIv == m_.iIv || !isConstIndex(idx[m_.rank - 1], 0)) return fail(at);
    auto sizeOf = [&](Value iv) { return m_.grid.getSizes()[cast<BlockArgument>(iv).getArgNumber()]; };
    const unsigned seq = unsigned(m_.rank - 2);
    if (!isTileCount(sizeOf(m_.iIv), m_.kernel, m_.oArg, seq, m_.rows) ||
        !isTileCount(sizeOf(m_.hIv), m_.kernel, m_.oArg, seq - 1, 1))
      return fail(m_.rank == 4 ? "the grid is not (ceildiv(S, 64), H, B) over O's dims"
                               : "the grid is not (ceildiv(T, 64), H, N) over O's dims [H, T, D]");
    if (m_.rank == 4) {
      if (!isTileCount(sizeOf(m_.bIv), m_.kernel, m_.oArg, 0, 1))
        return fail("the grid is not (ceildiv(S, 64), H, B) over O's dims");
      m_.bArg = m_.oArg, m_.bDim = 0, m_.bLess = 0;
    } else if (!matchSequenceCount(sizeOf(m_.bIv))) {
      return fail("the grid's sequence count is not a dim of an argument, less a constant");
    }
    if (cast<TileType>(m_.store.getValue().getType()).getElementType() != m_.inElt)
      return fail("the stored tile is not O's type");
    return true;
  }

  /// `n` is a symbolic dim N of some argument, or N - c (c a constant >= 0): bArg, bDim, bLess.
  bool matchSequenceCount(Value n) {
    int64_t less = 0;
    if (auto sub = n.getDefiningOp<arith::SubIOp>()) {
      auto c = sub.getRhs().getDefiningOp<arith::ConstantIndexOp>();
      if (!c || c.value() < 0) return false;
      less = c.value(), n = sub.getLhs();
    }
    auto d = n.getDefiningOp<DimOp>();
    if (!d) return false;
    for (unsigned a = 0; a < m_.kernel.getNumArguments(); ++a) {
      TensorArgType t = m_.kernel.getArgType(a);
      for (unsigned k = 0; k < unsigned(t.getRank()); ++k)
        if (t.getDimSymbol(k) == d.getSymbol()) {
          m_.bArg = a, m_.bDim = k, m_.bLess = less;
          return true;
        }
    }
    return false;
  }

  /// The optional second store: a [64] f32 tile into L[%b, %h, %i], L a 3-D f32 output
  /// whose dims are O's first three (AttentionMatch::rowStore).
  bool matchRowStore() {
    if (!m_.rowStore) return true;
    if (m_.rank != 4) return fail("row values are stored beside a 3-D O (only beside a 4-D one)");
    auto view = m_.rowStore.getView().getDefiningOp<ViewOp>();
    int l = view ? argOf(view, m_.kernel) : -1;
    if (l < 0) return fail("the second store is not through a view of a kernel argument");
    m_.rowArg = unsigned(l);
    TensorArgType lt = m_.kernel.getArgType(m_.rowArg), ot = m_.kernel.getArgType(m_.oArg);
    auto vt = cast<ViewType>(view.getType());
    auto value = cast<TileType>(m_.rowStore.getValue().getType());
    if (lt.getRank() != 3 || vt.getRank() != 1 || vt.getShape()[0] != m_.rows || value.getRank() != 1 ||
        !lt.getElementType().isF32() || !value.getElementType().isF32() || !m_.kernel.isOutput(m_.rowArg))
      return fail("the second store is not of one f32 value per query row into a 3-D f32 output");
    if (!llvm::equal(view.getIndices(), ValueRange{m_.bIv, m_.hIv, m_.iIv}))
      return fail("the row values are not written at (%b, %h, %i)");
    for (unsigned d = 0; d < 3; ++d)
      if (lt.getDimSymbol(d) != ot.getDimSymbol(d) || lt.getDimConstant(d) != ot.getDimConstant(d))
        return fail("the row values' dims are not O's first three");
    return true;
  }

  /// A zero-padded, unconverted load of a 64 x D or KV x D view of an argument of O's rank,
  /// type and head dim; its argument index.
  int matchLoad(LoadOp ld, const char* name) {
    auto view = ld ? ld.getView().getDefiningOp<ViewOp>() : ViewOp();
    int arg = view ? argOf(view, m_.kernel) : -1;
    if (arg < 0) return fail(std::string(name) + " is not a load of a kernel argument's view"), -1;
    TensorArgType t = m_.kernel.getArgType(unsigned(arg));
    auto vt = cast<ViewType>(view.getType());
    const unsigned last = unsigned(m_.rank - 1);
    if (t.getRank() != m_.rank || int64_t(view.getIndices().size()) != m_.rank || vt.getRank() != 2 ||
        t.getElementType() != m_.inElt || cast<TileType>(ld.getType()).getElementType() != m_.inElt ||
        t.getDimConstant(last) != m_.d || vt.getShape()[1] != m_.d || !isConstIndex(view.getIndices()[last], 0))
      return fail(std::string(name) + " is not a tensor of O's rank, type and head dim, read whole rows"), -1;
    if (ld.getPadding().convertToDouble() != 0.0) return fail(std::string(name) + " is not zero-padded"), -1;
    if (!ld->hasOneUse()) return fail(std::string(name) + "'s tile has more than one use"), -1;
    return arg;
  }

  bool matchDots() {
    SmallVector<DotOp> dots(m_.loop.getBody().front().getOps<DotOp>());
    if (dots.size() != 2) return fail("the loop has not exactly two dots");
    m_.scores = dots[0];
    m_.pv = dots[1];
    // S = Q K^T from zero.
    auto tr = m_.scores.getRhs().getDefiningOp<TransposeOp>();
    m_.q = m_.scores.getLhs().getDefiningOp<LoadOp>();
    m_.k = tr ? tr.getInput().getDefiningOp<LoadOp>() : LoadOp();
    auto zero = m_.scores.getAcc().getDefiningOp<FullOp>();
    if (!tr || !tr->hasOneUse() || !m_.q || !m_.k || !zero || zero.getValue().convertToDouble() != 0.0)
      return fail("the first dot is not Q K^T from zero");
    if (m_.q->getParentOp() != m_.grid) return fail("Q is not loaded once, before the loop");
    int q = matchLoad(m_.q, "Q"), kk = matchLoad(m_.k, "K");
    if (q < 0 || kk < 0) return false;
    m_.qArg = unsigned(q), m_.kArg = unsigned(kk);
    auto qv = m_.q.getView().getDefiningOp<ViewOp>();
    if (cast<ViewType>(qv.getType()).getShape()[0] != m_.rows ||
        !llvm::equal(qv.getIndices().drop_back(), m_.store.getView().getDefiningOp<ViewOp>().getIndices().drop_back()))
      return fail("Q is not read at O's tile");
    for (unsigned d = 0; d + 1 < unsigned(m_.rank); ++d)
      if (m_.kernel.getArgType(m_.qArg).getDimSymbol(d) != m_.kernel.getArgType(m_.oArg).getDimSymbol(d) ||
          m_.kernel.getArgType(m_.qArg).getDimConstant(d) != m_.kernel.getArgType(m_.oArg).getDimConstant(d))
        return fail("Q's dims are not O's");
    // acc' = cast(P) V + accIn.
    auto cast_ = m_.pv.getLhs().getDefiningOp<CastOp>();
    m_.v = m_.pv.getRhs().getDefiningOp<LoadOp>();
    if (!cast_ || !cast<TileType>(cast_.getInput().getType()).getElementType().isF32() ||
        cast<TileType>(cast_.getType()).getElementType() != m_.inElt || !m_.v)
      return fail("the second dot is not cast(P) V");
    int vv = matchLoad(m_.v, "V");
    if (vv < 0) return false;
    m_.vArg = unsigned(vv);
    {
      auto qt = m_.kernel.getArgType(m_.qArg), kt = m_.kernel.getArgType(m_.kArg);
      const unsigned seq = unsigned(m_.rank - 2);
      m_.queriesAreKeys = qt.getDimSymbol(seq) == kt.getDimSymbol(seq) && qt.getDimConstant(seq) == kt.getDimConstant(seq);
    }
    m_.kv = cast<ViewType>(m_.k.getView().getType()).getShape()[0];
    if ((m_.kv != 64 && m_.kv != 128) || cast<ViewType>(m_.v.getView().getType()).getShape()[0] != m_.kv)
      return fail("K's and V's tiles are not both 64 or 128 keys");
    // K and V at (x, y, %j, 0) (rank 3: (y, %j, 0)) with x, y the same for every query tile.
    Value j = m_.loop.getInductionVar();
    for (LoadOp ld : {m_.k, m_.v}) {
      auto idx = ld.getView().getDefiningOp<ViewOp>().getIndices();
      if (idx[m_.rank - 2] != j) return fail("K or V is not read at the loop's key tile");
      for (Value x : idx.take_front(m_.rank - 2))
        if (dependsOn(x, j) || dependsOn(x, m_.iIv))
          return fail("K's or V's head is computed from the query tile or the key tile");
    }
    if (m_.kernel.isOutput(m_.qArg) || m_.kernel.isOutput(m_.kArg) || m_.kernel.isOutput(m_.vArg) ||
        llvm::is_contained({m_.qArg, m_.kArg, m_.vArg}, m_.oArg))
      return fail("O is also read");
    if (!llvm::is_contained(m_.loop.getBody().front().getTerminator()->getOperands(), m_.pv.getResult()))
      return fail("the second dot's result is not carried by the loop");
    return true;
  }

  /// A tile the warpgroup's accumulator layout holds: [64] (rows) or [64 x n], n a multiple
  /// of 8 up to 256.
  bool rowTile(Type t) {
    auto tt = dyn_cast<TileType>(t);
    if (!tt || tt.getShape()[0] != m_.rows) return false;
    if (tt.getRank() == 1) return true;
    return tt.getRank() == 2 && tt.getShape()[1] % 8 == 0 && tt.getShape()[1] <= 256;
  }

  /// An index computed from the grid's indices, the loop's index, the kernel's dims,
  /// constants and elements of i32 inputs (tile.read, noted in `reads`) by arith ops.
  bool indexExpr(Value v) {
    if (isa<BlockArgument>(v))
      return cast<BlockArgument>(v).getOwner() == &m_.grid.getBody().front() || v == m_.loop.getInductionVar();
    Operation* def = v.getDefiningOp();
    if (isa<DimOp>(def)) return true;
    if (auto r = dyn_cast<ReadOp>(def)) {
      auto ba = dyn_cast<BlockArgument>(r.getTensor());
      if (!ba || ba.getOwner() != &m_.kernel.getBody().front()) return false;
      if (!llvm::all_of(r.getIndices(), [&](Value x) { return indexExpr(x); })) return false;
      if (!llvm::is_contained(m_.reads, ba.getArgNumber())) m_.reads.push_back(ba.getArgNumber());
      return true;
    }
    if (def->getDialect()->getNamespace() != "arith" || def->getNumRegions() != 0) return false;
    return llvm::all_of(def->getOperands(), [&](Value x) { return indexExpr(x); });
  }

  /// Windows along the sequence dim only: on K's and V's views, the same for both
  /// (AttentionMatch::keyStart, keyLen), and on Q's and O's, the same for both (qStart,
  /// qLen); each bound an index expression of neither the query tile nor the key tile (one
  /// producer loads for all of a CTA's programs).
  bool matchWindows() {
    auto kv = m_.k.getView().getDefiningOp<ViewOp>(), vv = m_.v.getView().getDefiningOp<ViewOp>();
    auto qv = m_.q.getView().getDefiningOp<ViewOp>(), ov = m_.store.getView().getDefiningOp<ViewOp>();
    const unsigned seq = unsigned(m_.rank - 2);
    bool ok = true;
    m_.kernel.walk([&](ViewOp view) {
      ok = ok && (!view.hasWindow() || (llvm::is_contained({kv, vv, qv, ov}, view) && view.getWindowDim() == seq));
    });
    auto same = [](ViewOp a, ViewOp b) {
      return a.hasWindow() == b.hasWindow() &&
             (!a.hasWindow() || (a.getWindowStart() == b.getWindowStart() && a.getWindowSize() == b.getWindowSize()));
    };
    if (!ok || !same(kv, vv) || !same(qv, ov))
      return fail("a view narrows a dim to a window other than along the sequence, the same for K and V and the same "
                  "for Q and O (Tensor::window)");
    if (kv.hasWindow()) {
      m_.keyLen = kv.getWindowSize();
      if (!isConstIndex(kv.getWindowStart(), 0)) m_.keyStart = kv.getWindowStart();
    }
    if (qv.hasWindow()) m_.qStart = qv.getWindowStart(), m_.qLen = qv.getWindowSize();
    if (m_.rank == 3 && (!qv.hasWindow() || !kv.hasWindow()))
      return fail("Q, K, V and O of rank 3 are not all windowed to a sequence (Tensor::window)");
    if (m_.qLen && m_.rowStore) return fail("row values are stored beside a windowed O");
    for (Value x : {m_.keyStart, m_.keyLen, m_.qStart, m_.qLen}) {
      if (!x) continue;
      if (!indexExpr(x)) return fail("a window's start or size is not an index expression");
      if (dependsOn(x, m_.iIv) || dependsOn(x, m_.loop.getInductionVar()))
        return fail("a window depends on the query tile or the key tile");
    }
    m_.sequenceGrid = m_.rank == 3 && m_.qLen && !dependsOn(m_.qLen, m_.hIv) &&
                      !(m_.qStart && dependsOn(m_.qStart, m_.hIv));
    return true;
  }

  bool matchOps() {
    if (!indexExpr(m_.loop.getCount())) return fail("the loop's count is not an index expression");
    auto check = [&](Block& block) -> bool {
      for (Operation& op : block.without_terminator()) {
        if (&op == m_.loop || &op == m_.store || &op == m_.rowStore || op.getDialect()->getNamespace() == "arith")
          continue;
        if (&op == m_.scores || &op == m_.pv || &op == m_.q || &op == m_.k || &op == m_.v) continue;
        if (isa<ReadOp>(op)) {
          if (!indexExpr(op.getResult(0))) return fail("a tile.read is not of an i32 input at index expressions");
          continue;
        }
        if (isa<TransposeOp>(op) && op.getResult(0) == m_.scores.getRhs()) continue;
        if (auto v = dyn_cast<ViewOp>(op)) {
          if (v.getResult() == m_.store.getView() || (m_.rowStore && v.getResult() == m_.rowStore.getView()) ||
              v.getResult() == m_.q.getView() ||
              v.getResult() == m_.k.getView() || v.getResult() == m_.v.getView()) {
            if (!llvm::all_of(v.getIndices(), [&](Value x) { return indexExpr(x); }))
              return fail("a view's indices are not index expressions");
            continue;
          }
          return fail("a view other than Q's, K's, V's, O's and the row values'");
        }
        if (!llvm::all_of(op.getResultTypes(), [&](Type t) { return rowTile(t); }))
          return fail("'" + op.getName().getStringRef().str() + "' makes a tile of other than 64 rows");
        if (isa<FullOp, IotaOp>(op) || isScalarMathOp(&op)) continue;
        if (auto s = dyn_cast<SplatOp>(op)) {
          if (!s.getScalar().getType().isIndex() || !indexExpr(s.getScalar()))
            return fail("a splat is not of an index expression");
          continue;
        }
        if (auto bc = dyn_cast<BroadcastOp>(op)) {
          auto in = cast<TileType>(bc.getInput().getType());
          if (in.getRank() != 1 || bc.getDims().size() != 1 || bc.getDims()[0] != 0)
            return fail("a broadcast is not of a row value along the columns");
          continue;
        }
        if (isa<ReduceMaxOp, ReduceSumOp>(op)) {
          auto in = cast<TileType>(op.getOperand(0).getType());
          if (in.getRank() != 2 || cast<IntegerAttr>(op.getAttr("dim")).getInt() != 1)
            return fail("a reduction is not along a row");
          continue;
        }
        return fail("'" + op.getName().getStringRef().str() + "' is not supported in attention on sm_90a");
      }
      return true;
    };
    if (!check(m_.grid.getBody().front()) || !check(m_.loop.getBody().front())) return false;
    for (Value init : m_.loop.getInits())
      if (!rowTile(init.getType())) return fail("the loop carries a tile of other than 64 rows");
    return true;
  }

  /// Whether the query heads may be folded (AttentionMatch::foldHeads).
  bool matchHeadGroups() {
    // Folded heads share a Q box of T rows of f heads: whole sequences of a 4-D Q.
    if (m_.rank != 4 || m_.qLen) return false;
    auto kView = m_.k.getView().getDefiningOp<ViewOp>(), vView = m_.v.getView().getDefiningOp<ViewOp>();
    Value g = kView.getIndices()[1];
    if (vView.getIndices()[1] != g || dependsOn(kView.getIndices()[0], m_.hIv) || dependsOn(vView.getIndices()[0], m_.hIv))
      return false;
    auto dimNamed = [&](Value v, unsigned arg) {
      auto d = v.getDefiningOp<DimOp>();
      return d && d.getSymbol() == m_.kernel.getArgType(arg).getDimSymbol(1) && !d.getSymbol().empty();
    };
    auto byGroup = g.getDefiningOp<arith::FloorDivSIOp>();
    auto size = byGroup ? byGroup.getRhs().getDefiningOp<arith::MaxSIOp>() : arith::MaxSIOp();
    auto ratio = size ? size.getLhs().getDefiningOp<arith::FloorDivSIOp>() : arith::FloorDivSIOp();
    auto groups = ratio ? ratio.getRhs().getDefiningOp<arith::MaxSIOp>() : arith::MaxSIOp();
    if (!groups || byGroup.getLhs() != m_.hIv || !isConstIndex(size.getRhs(), 1) || !isConstIndex(groups.getRhs(), 1) ||
        !dimNamed(ratio.getLhs(), m_.oArg) || !dimNamed(groups.getLhs(), m_.kArg) ||
        m_.kernel.getArgType(m_.vArg).getDimSymbol(1) != m_.kernel.getArgType(m_.kArg).getDimSymbol(1))
      return false;
    // h only in Q's and O's views (at their head, where matchDots and matchStore put it)
    // and the group; the group only in K's and V's views.
    for (Operation* user : m_.hIv.getUsers())
      if (user != byGroup && user != m_.q.getView().getDefiningOp() && user != m_.store.getView().getDefiningOp() &&
          !(m_.rowStore && user == m_.rowStore.getView().getDefiningOp()))
        return false;
    return llvm::all_of(g.getUsers(), [&](Operation* u) { return u == kView || u == vView; });
  }

  /// Fills m_.softmax (see AttentionMatch::SoftmaxState); false with `why` otherwise.
  bool matchSoftmaxState(std::string& why) {
    auto no = [&](const char* s) {
      why = s;
      return false;
    };
    Block& body = m_.loop.getBody().front();
    ValueRange yields = body.getTerminator()->getOperands();
    auto carried = m_.loop.getCarried();
    if (carried.size() != 3) return no("the loop does not carry exactly m, l and acc");
    // Either operand order of a commutative op: (x, other) with x = want.
    auto other = [](Operation* op, Value want) -> Value {
      if (!op || op->getNumOperands() != 2) return Value();
      if (op->getOperand(0) == want) return op->getOperand(1);
      if (op->getOperand(1) == want) return op->getOperand(0);
      return Value();
    };
    AttentionMatch::SoftmaxState st;
    int m = -1;
    for (unsigned k = 0; k < 3 && m < 0; ++k)
      if (auto mx = yields[k].getDefiningOp<MaxOp>(); mx && other(mx, carried[k])) m = int(k);
    if (m < 0) return no("no carried value is a running max (yield max(m, x))");
    st.m = unsigned(m);
    // The accumulator: the second dot's result, on acc a (a broadcast along the rows).
    int acc = -1;
    for (unsigned k = 0; k < 3; ++k)
      if (yields[k] == m_.pv.getResult()) acc = int(k);
    if (acc < 0 || acc == m) return no("the second dot's result is not carried");
    st.acc = unsigned(acc);
    const unsigned l = 3 - st.m - st.acc;
    st.l = l;
    // a = base^(m - m'), from the rescale of the accumulator.
    Operation* scaled = m_.pv.getAcc().getDefiningOp();
    if (!isa_and_nonnull<MulOp>(scaled)) return no("the second dot's accumulator is not acc a");
    Value bcast = other(scaled, carried[st.acc]);
    auto bc = bcast ? bcast.getDefiningOp<BroadcastOp>() : BroadcastOp();
    if (!bc) return no("the second dot's accumulator is not acc a");
    Value a = bc.getInput();
    Operation* e = a.getDefiningOp();
    if (!isa_and_nonnull<Exp2Op, ExpOp>(e)) return no("the rescale is not exp2 or exp of m - m'");
    st.base2 = isa<Exp2Op>(e);
    auto diff = e->getOperand(0).getDefiningOp<SubOp>();
    if (!diff || diff.getOperand(0) != carried[st.m] || diff.getOperand(1) != yields[st.m])
      return no("the rescale is not exp2 or exp of m - m'");
    // l' = l a + y.
    auto sum = yields[l].getDefiningOp<AddOp>();
    bool ok = false;
    for (unsigned k = 0; sum && k < 2 && !ok; ++k)
      if (auto mul = sum->getOperand(k).getDefiningOp<MulOp>()) ok = other(mul, carried[l]) == a;
    if (!ok) return no("the running sum is not l a + y");
    // Initial state: -inf, 0, 0 (a part with no keys is the merge's neutral element).
    auto fullOf = [&](unsigned k) -> std::optional<double> {
      auto f = m_.loop.getInits()[k].getDefiningOp<FullOp>();
      if (!f) return std::nullopt;
      return f.getValue().convertToDouble();
    };
    auto m0 = fullOf(st.m), l0 = fullOf(l), a0 = fullOf(st.acc);
    if (!m0 || !std::isinf(*m0) || *m0 > 0 || l0 != 0.0 || a0 != 0.0)
      return no("the loop does not start from m = -inf, l = 0, acc = 0");
    for (SelectOp sel : body.getOps<SelectOp>())
      if (!indexComparisons(sel.getMask())) return no("a select's mask is not comparisons of index tiles");
    m_.softmax = st;
    return true;
  }

  /// Comparisons (<, <=, >, >=) of index tiles (iota, splats of indices, their sums and
  /// differences) and products of them: masks whose bounds the twin can reason about.
  bool indexComparisons(Value cond) {
    Operation* op = cond.getDefiningOp();
    if (auto bc = dyn_cast_or_null<BroadcastOp>(op)) return indexComparisons(bc.getInput());
    if (isa_and_nonnull<MulOp>(op)) return indexComparisons(op->getOperand(0)) && indexComparisons(op->getOperand(1));
    auto c = dyn_cast_or_null<CmpOp>(op);
    return c && llvm::is_contained({"lt", "le", "gt", "ge"}, c.getPredicate()) && indexTile(c.getLhs()) &&
           indexTile(c.getRhs());
  }
  bool indexTile(Value v) {
    Operation* op = v.getDefiningOp();
    if (isa_and_nonnull<IotaOp>(op)) return true;
    if (auto s = dyn_cast_or_null<SplatOp>(op)) return s.getScalar().getType().isIndex();
    if (auto bc = dyn_cast_or_null<BroadcastOp>(op)) return indexTile(bc.getInput());
    if (isa_and_nonnull<AddOp, SubOp>(op)) return indexTile(op->getOperand(0)) && indexTile(op->getOperand(1));
    return false;
  }

  AttentionMatch& m_;
  std::string& why_;
};

} // namespace

bool matchAttention(KernelOp kernel, AttentionMatch& out, std::string& why) { return Matcher(out, why).run(kernel); }

} // namespace kiln::hopper
