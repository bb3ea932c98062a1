#include "Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {
#define GEN_PASS_DEF_KILNEXPANDCOMPOSITES
#include "Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln::tile;

namespace {

Value full(PatternRewriter& r, Location loc, Type t, double v) {
  return r.create<FullOp>(loc, t, r.getF64FloatAttr(v));
}

struct ExpandRelu : OpRewritePattern<ReluOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReluOp op, PatternRewriter& r) const override {
    Value zero = full(r, op.getLoc(), op.getType(), 0.0);
    r.replaceOpWithNewOp<MaxOp>(op, op.getInput(), zero);
    return success();
  }
};

struct ExpandSigmoid : OpRewritePattern<SigmoidOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SigmoidOp op, PatternRewriter& r) const override {
    Location loc = op.getLoc();
    Type t = op.getType();
    Value e = r.create<ExpOp>(loc, r.create<NegOp>(loc, op.getInput()));
    Value one = full(r, loc, t, 1.0);
    r.replaceOpWithNewOp<DivOp>(op, one, r.create<AddOp>(loc, one, e));
    return success();
  }
};

struct ExpandSilu : OpRewritePattern<SiluOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SiluOp op, PatternRewriter& r) const override {
    Value s = r.create<SigmoidOp>(op.getLoc(), op.getInput());
    r.replaceOpWithNewOp<MulOp>(op, op.getInput(), s);
    return success();
  }
};

struct ExpandGelu : OpRewritePattern<GeluOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GeluOp op, PatternRewriter& r) const override {
    Location loc = op.getLoc();
    Value x = op.getInput();
    // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    Value x3 = r.create<MulOp>(loc, r.create<MulOp>(loc, x, x), x);
    Value inner = r.create<AddOp>(loc, x, r.create<ScaleOp>(loc, x3, r.getF64FloatAttr(0.044715)));
    Value t = r.create<TanhOp>(loc, r.create<ScaleOp>(loc, inner,
                                                      r.getF64FloatAttr(0.7978845608028654)));
    Value onePlus = r.create<AddOp>(loc, full(r, loc, x.getType(), 1.0), t);
    r.replaceOpWithNewOp<MulOp>(op, r.create<ScaleOp>(loc, x, r.getF64FloatAttr(0.5)), onePlus);
    return success();
  }
};

struct ExpandCompositesPass
    : kiln::impl::KilnExpandCompositesBase<ExpandCompositesPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ExpandRelu, ExpandSigmoid, ExpandSilu, ExpandGelu>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
