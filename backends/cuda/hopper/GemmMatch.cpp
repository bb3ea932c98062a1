#include "hopper/GemmMatch.h"
#include "hopper/MatchUtil.h"

#include "Transforms/ScalarMath.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

namespace kiln::hopper {

using namespace mlir;
using namespace kiln::tile;

namespace {

/// Symbol or constant of dim `d` of argument `arg`, as one comparable string.
std::string dimKey(KernelOp k, unsigned arg, unsigned d) {
  TensorArgType t = k.getArgType(arg);
  StringRef s = t.getDimSymbol(d);
  return s.empty() ? "#" + std::to_string(t.getDimConstant(d)) : s.str();
}

bool isHalf(Type t) { return t.isBF16() || t.isF16(); }

class Matcher {
public:
  Matcher(GemmMatch& m, std::string& why) : m_(m), why_(why) {}

  bool fail(const std::string& s) {
    why_ = s;
    return false;
  }

  bool run(KernelOp k) {
    m_.kernel = k;
    GridLoopStore g;
    if (!matchGridLoopStore(k, 2, g, why_)) return false;
    m_.grid = g.grid, m_.loop = g.loop, m_.store = g.store;
    Block& body = m_.grid.getBody().front();
    if (!matchLoop()) return false;
    if (!matchStore()) return false;
    // The twin writes every tile of C: the grid must cover C exactly, i along M and j along N.
    for (auto [iv, dim] : {std::pair{m_.rowIv, 0u}, std::pair{m_.colIv, 1u}}) {
      Value size = m_.grid.getSizes()[cast<BlockArgument>(iv).getArgNumber()];
      if (!isTileCount(size, m_.kernel, m_.c, dim, shapeOf_[dim]))
        return fail("the grid does not cover C exactly (ceildiv of C's dims by its tile)");
    }
    // Every op of the grid body is the loop, the store, index arithmetic for the loop
    // count, the accumulator's zero tile, or part of the epilogue checked above.
    for (Operation& op : body.without_terminator()) {
      if (&op == m_.loop || &op == m_.store || op.getDialect()->getNamespace() == "arith") continue;
      if (auto f = dyn_cast<FullOp>(op); f && llvm::is_contained(m_.loop.getInits(), f.getResult())) continue;
      if (auto v = dyn_cast<ViewOp>(op)) {
        bool epilogueView = v.getResult() == m_.store.getView() || llvm::all_of(v->getUsers(), [&](Operation* u) {
                              return isa<LoadOp>(u) && m_.axes.count(u->getResult(0));
                            });
        if (epilogueView) continue;
      }
      bool epilogueOp = op.getNumResults() > 0 && llvm::all_of(op.getResults(), [&](Value r) { return m_.axes.count(r); });
      if (!epilogueOp) return fail("'" + op.getName().getStringRef().str() + "' is not part of the epilogue");
    }
    return true;
  }

private:
  bool matchLoop() {
    LoopOp l = m_.loop;
    const size_t n = l.getInits().size();
    if (n != 1 && n != 2) return fail("the k-loop carries more than the accumulator (or two sharing A)");
    m_.dual = n == 2;
    Block& lb = l.getBody().front();
    auto yield = cast<YieldOp>(lb.getTerminator());
    SmallVector<Operation*> allowed;
    SmallVector<ViewOp, 2> bViews;
    SmallVector<LoadOp, 2> bLoads;
    Value aTile;
    for (size_t p = 0; p < n; ++p) {
      auto init = l.getInits()[p].getDefiningOp<FullOp>();
      if (!init || init.getValue().convertToDouble() != 0.0) return fail("the accumulator does not start at zero");
      auto accT = cast<TileType>(init.getType());
      if (!accT.getElementType().isF32() || accT.getRank() != 2) return fail("the accumulator is not a 2-D f32 tile");
      if (init.getType() != l.getInits()[0].getType()) return fail("the two accumulators differ in shape");
      auto dot = yield.getValues()[p].getDefiningOp<DotOp>();
      if (!dot || dot.getAcc() != l.getCarried()[p]) return fail("the k-loop does not yield dot(a, b, acc)");
      if (p == 0) aTile = dot.getLhs();
      else if (dot.getLhs() != aTile) return fail("the two products do not share A's tile");
      auto lbOp = dot.getRhs().getDefiningOp<LoadOp>();
      if (!lbOp || lbOp.getPadding().convertToDouble() != 0.0) return fail("the dot's operands are not zero-padded loads");
      auto vb = lbOp.getView().getDefiningOp<ViewOp>();
      if (!vb) return fail("the dot's operands are not loads of views");
      bViews.push_back(vb);
      bLoads.push_back(lbOp);
      allowed.append({dot, lbOp, vb});
    }
    auto la = aTile.getDefiningOp<LoadOp>();
    if (!la || la.getPadding().convertToDouble() != 0.0) return fail("the dot's operands are not zero-padded loads");
    auto va = la.getView().getDefiningOp<ViewOp>();
    if (!va) return fail("the dot's operands are not loads of views");
    allowed.append({la, va});
    ViewOp vb = bViews[0];
    int a = argOf(va, m_.kernel), b = argOf(vb, m_.kernel);
    if (a < 0 || b < 0) return fail("the dot's operands are not views of kernel arguments");
    if (va.getIndices().size() != 2 || vb.getIndices().size() != 2) return fail("A or B is not 2-D");
    Value kk = l.getInductionVar();
    auto& gridArgs = m_.grid.getBody().front();
    m_.rowIv = va.getIndices()[0];
    m_.colIv = vb.getIndices()[1];
    if (va.getIndices()[1] != kk || vb.getIndices()[0] != kk || m_.rowIv == m_.colIv ||
        !llvm::is_contained(gridArgs.getArguments(), m_.rowIv) || !llvm::is_contained(gridArgs.getArguments(), m_.colIv))
      return fail("A is not read at (i, k) and B at (k, j)");
    auto at = cast<ViewType>(va.getType()), bt = cast<ViewType>(vb.getType());
    if (at.getElementType() != bt.getElementType() || !isHalf(at.getElementType()))
      return fail("A and B are not both bf16 or both f16");
    if (cast<TileType>(la.getType()).getElementType() != at.getElementType() ||
        cast<TileType>(bLoads[0].getType()).getElementType() != bt.getElementType())
      return fail("A or B is converted on load");
    m_.a = unsigned(a);
    m_.b = unsigned(b);
    m_.inElt = at.getElementType();
    if (dimKey(m_.kernel, m_.a, 1) != dimKey(m_.kernel, m_.b, 0)) return fail("A's K and B's K are different dims");
    if (!isTileCount(l.getCount(), m_.kernel, m_.a, 1, at.getShape()[1]))
      return fail("the k-loop does not run ceildiv(K, tile k) times");
    if (m_.dual) { // B2 read as B is: at (k, j), the same tile, type and dims
      ViewOp v2 = bViews[1];
      int b2 = argOf(v2, m_.kernel);
      if (b2 < 0 || v2.getIndices().size() != 2 || v2.getIndices()[0] != kk || v2.getIndices()[1] != m_.colIv ||
          v2.getType() != vb.getType() || bLoads[1].getType() != bLoads[0].getType())
        return fail("the second product's B is not read as the first's (at (k, j), the same tile and type)");
      m_.b2 = unsigned(b2);
      if (dimKey(m_.kernel, m_.b2, 0) != dimKey(m_.kernel, m_.b, 0) || dimKey(m_.kernel, m_.b2, 1) != dimKey(m_.kernel, m_.b, 1))
        return fail("the two products' B have different dims");
    }
    // Nothing else in the loop body.
    for (Operation& op : lb.without_terminator())
      if (!llvm::is_contained(allowed, &op) && op.getDialect()->getNamespace() != "arith")
        return fail(m_.dual ? "the k-loop does more than two dots sharing A" : "the k-loop does more than one dot");
    return true;
  }

  bool matchStore() {
    auto view = m_.store.getView().getDefiningOp<ViewOp>();
    if (!view) return fail("the store is not through a view");
    int c = argOf(view, m_.kernel);
    if (c < 0 || view.getIndices().size() != 2 || view.getIndices()[0] != m_.rowIv || view.getIndices()[1] != m_.colIv)
      return fail("C is not written at (i, j)");
    m_.c = unsigned(c);
    if (dimKey(m_.kernel, m_.c, 0) != dimKey(m_.kernel, m_.a, 0) || dimKey(m_.kernel, m_.c, 1) != dimKey(m_.kernel, m_.b, 1))
      return fail("C's dims are not A's M and B's N");
    shapeOf_.assign(cast<ViewType>(view.getType()).getShape().begin(), cast<ViewType>(view.getType()).getShape().end());
    auto accShape = cast<TileType>(m_.loop.getInits()[0].getType()).getShape();
    if (ArrayRef<int64_t>(shapeOf_) != accShape) return fail("C's tile is not the accumulator's");
    if (m_.kernel.getArgType(m_.c).getElementType() != cast<ViewType>(view.getType()).getElementType())
      return fail("C's view has another type");
    if (!m_.kernel.isOutput(m_.c) || m_.c == m_.a || m_.c == m_.b || (m_.dual && m_.c == m_.b2))
      return fail("C is not an output of its own");
    if (!epilogue(m_.store.getValue(), {Axis::Row, Axis::Col})) return false;
    if (llvm::is_contained(m_.epilogueInputs, m_.c)) return fail("the epilogue reads C");
    return true;
  }

  /// Checks the epilogue value `v` whose dims run along `axes`, recording them.
  bool epilogue(Value v, SmallVector<Axis, 2> axes) {
    auto t = dyn_cast<TileType>(v.getType());
    if (!t || size_t(t.getRank()) != axes.size()) return fail("an epilogue value is not a tile of C's axes");
    for (size_t d = 0; d < axes.size(); ++d)
      if (t.getShape()[d] != shapeOf_[axes[d] == Axis::Row ? 0 : 1]) return fail("an epilogue tile is not C's tile");
    auto [it, fresh] = m_.axes.try_emplace(v, axes);
    if (!fresh) return it->second == axes ? true : fail("an epilogue value is used along two axes");
    if (v == m_.loop.getResult(0) || (m_.dual && v == m_.loop.getResult(1)))
      return axes == SmallVector<Axis, 2>{Axis::Row, Axis::Col};
    Operation* def = v.getDefiningOp();
    if (!def || def->getParentOp() != m_.grid) return fail("an epilogue value comes from outside the grid");
    if (isa<FullOp>(def)) return true;
    if (auto bc = dyn_cast<BroadcastOp>(def)) {
      SmallVector<Axis, 2> in;
      for (int64_t d : bc.getDims()) in.push_back(axes[size_t(d)]);
      return epilogue(bc.getInput(), in);
    }
    if (auto ld = dyn_cast<LoadOp>(def)) {
      auto view = ld.getView().getDefiningOp<ViewOp>();
      int arg = view ? argOf(view, m_.kernel) : -1;
      if (arg < 0) return fail("an epilogue load is not of a kernel argument's view");
      if (view.getIndices().size() != size_t(cast<ViewType>(view.getType()).getRank()))
        return fail("an epilogue view fixes leading dims of its tensor");
      if (cast<TileType>(ld.getType()).getElementType() != cast<ViewType>(view.getType()).getElementType())
        return fail("an epilogue load converts");
      for (size_t d = 0; d < axes.size(); ++d) {
        Value want = axes[d] == Axis::Row ? m_.rowIv : m_.colIv;
        if (view.getIndices()[d] != want) return fail("an epilogue view is not at C's tile");
        std::string dk = dimKey(m_.kernel, unsigned(arg), unsigned(d));
        if (dk != dimKey(m_.kernel, m_.c, axes[d] == Axis::Row ? 0 : 1)) return fail("an epilogue input's dim is not C's");
      }
      if (!llvm::is_contained(m_.epilogueInputs, unsigned(arg))) m_.epilogueInputs.push_back(unsigned(arg));
      return true;
    }
    if (isScalarMathOp(def)) {
      for (Value in : def->getOperands())
        if (!epilogue(in, axes)) return false;
      return true;
    }
    return fail("'" + def->getName().getStringRef().str() + "' is not supported in a GEMM epilogue on sm_90a");
  }

  GemmMatch& m_;
  std::string& why_;
  SmallVector<int64_t, 2> shapeOf_;
};

} // namespace

bool matchGemm(KernelOp kernel, GemmMatch& out, std::string& why) { return Matcher(out, why).run(kernel); }

bool readsRowInputs(const GemmMatch& m) {
  return llvm::any_of(m.axes, [](const auto& entry) {
    return entry.first.template getDefiningOp<tile::LoadOp>() && llvm::is_contained(entry.second, Axis::Row);
  });
}

} // namespace kiln::hopper
