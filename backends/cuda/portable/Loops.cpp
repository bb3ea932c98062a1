// The portable CUDA lowering: tile.loop, plain and software-pipelined (cp.async ring). (portable/Lowering.h)
#include "portable/Lowering.h"

namespace kiln::portable {

LogicalResult GpuKernelLowering::lowerLoop(LoopOp l) {
  // A carried tile keeps its layout across iterations (an mma accumulator stays in
  // registers): the one kiln-assign-layouts gave it.
  SmallVector<Layout> layouts;
  SmallVector<Value> inits;
  SmallVector<size_t> sizes;
  for (auto [i, init] : llvm::enumerate(l.getInits())) {
    auto t = cast<TileType>(init.getType());
    // kiln-assign-layouts' decision: the carried tile's encoding.
    const Dist& d = tiles_.at(init);
    Layout lay = layoutOf(l.getCarried()[i].getType());
    Elems e = as(d, t, lay);
    inits.append(e.begin(), e.end());
    sizes.push_back(e.size());
    layouts.push_back(lay);
  }
  Elems results;
  if (auto plan = pipelinePlan(l)) {
    // Pipelined when both operands' rows allow 16-byte cp.async (decided per launch, since
    // strides are launch values); the plain loop otherwise.
    auto base = [&](LoadOp ld) { return map_.lookup(ld.getView().getDefiningOp<ViewOp>().getTensor()); };
    Value aligned = andOf(rowsAligned(base(plan->a), plan->a.getType()),
                          rowsAligned(base(plan->b), plan->b.getType()));
    SmallVector<Type> types;
    for (Value v : inits) types.push_back(v.getType());
    auto ifOp = b_.create<scf::IfOp>(loc_, types, aligned, /*withElse=*/true);
    {
      OpBuilder::InsertionGuard guard(b_);
      b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
      b_.create<scf::YieldOp>(loc_, ValueRange(lowerLoopPipelined(l, *plan, inits)));
      b_.setInsertionPointToStart(&ifOp.getElseRegion().front());
      FailureOr<Elems> simple = lowerLoopSimple(l, layouts, inits);
      if (failed(simple)) return failure();
      b_.create<scf::YieldOp>(loc_, ValueRange(*simple));
    }
    results.assign(ifOp.getResults().begin(), ifOp.getResults().end());
  } else {
    FailureOr<Elems> simple = lowerLoopSimple(l, layouts, inits);
    if (failed(simple)) return failure();
    results = *simple;
  }
  size_t at = 0;
  for (auto [i, r] : llvm::enumerate(l.getResults())) {
    tiles_[r] = Dist{Elems(results.begin() + at, results.begin() + at + sizes[i]), layouts[i], false};
    at += sizes[i];
  }
  return success();
}

bool GpuKernelLowering::loadsAtIv(LoopOp l, LoadOp ld) {
  Block& body = l.getBody().front();
  std::function<bool(Value)> fromIv = [&](Value v) -> bool {
    Operation* def = v.getDefiningOp();
    if (v == l.getInductionVar() || !def || def->getBlock() != &body) return v == l.getInductionVar() || map_.contains(v);
    return def->getDialect()->getNamespace() == arith::ArithDialect::getDialectNamespace() &&
           llvm::all_of(def->getOperands(), fromIv);
  };
  auto view = ld.getView().getDefiningOp<ViewOp>();
  auto arg = view ? dyn_cast<BlockArgument>(view.getTensor()) : BlockArgument();
  return ld->getBlock() == &body && view && view->getBlock() == &body && arg &&
         arg.getOwner()->getParentOp() == kernel_ && !kernel_.isOutput(arg.getArgNumber()) &&
         llvm::all_of(view.getIndices(), fromIv);
}

// The tensor-core dot that reads `ld` straight from shared memory (its only use, or through
// a folded transpose), in the same block; null otherwise.
static DotOp dotReading(LoadOp ld, llvm::function_ref<DotOp(TransposeOp)> folds) {
  if (!ld->hasOneUse()) return {};
  Operation* user = *ld->user_begin();
  if (auto tr = dyn_cast<TransposeOp>(user)) return folds(tr);
  auto d = dyn_cast<DotOp>(user);
  return d && d.getAcc() != ld.getResult() && d->getBlock() == ld->getBlock() ? d : DotOp();
}

// Loads issued one iteration ahead: the body's loads of input tensors at views computed from
// the induction variable by index arithmetic (not those a dot copies to shared memory
// itself). Each CTA then has this iteration's and the next one's tiles in flight, where it
// had one small load at a time (the row kernels' 4 x 256 tiles). Safe for an input written in
// place: allow_in_place promises each element is read before the program writes it, and the
// next iteration's elements are not this one's.
SmallVector<LoadOp> GpuKernelLowering::prefetchable(LoopOp l) {
  SmallVector<LoadOp> out;
  for (Operation& op : l.getBody().front().without_terminator()) {
    auto ld = dyn_cast<LoadOp>(op);
    if (!ld || !loadsAtIv(l, ld)) continue;
    // The loads a dot (or a dot through a folded transpose) copies to shared memory itself.
    if (ld->hasOneUse()) {
      Operation* user = *ld->user_begin();
      if (auto tr = dyn_cast<TransposeOp>(user); tr && foldsTranspose(tr)) continue;
      if (isa<DotOp>(user)) continue;
    }
    out.push_back(ld);
  }
  return out;
}

// Attention's K and V tiles: loaded in the loop, each read only by a tensor-core dot. Copied
// global -> shared by cp.async into two slots each, iteration j + 1's copies issued while
// iteration j computes (one commit group per iteration), so their latency hides behind a
// whole iteration of work instead of stalling each dot.
SmallVector<GpuKernelLowering::Ring> GpuKernelLowering::ringLoads(LoopOp l) {
  SmallVector<Ring> out;
  for (Operation& op : l.getBody().front().without_terminator()) {
    auto ld = dyn_cast<LoadOp>(op);
    if (!ld || !ld.getPadding().isZero() || !loadsAtIv(l, ld)) continue;
    DotOp d = dotReading(ld, [&](TransposeOp tr) { return foldsTranspose(tr); });
    if (!d || !mmaLayoutFor(d)) continue;
    TileType t = ld.getType();
    if (t.getRank() != 2 || t.getShape()[1] % 8) continue;
    out.push_back(Ring{ld, 0});
  }
  return out;
}

Elems GpuKernelLowering::loadAt(LoadOp ld, LoopOp l, Value iv) {
  ViewInfo v = viewOf(ld.getView().getDefiningOp<ViewOp>(), [&](Value idx) { return remat(idx, l, iv); });
  TileType t = ld.getType();
  SmallVector<Value> dims = dimsOf(v.base, v.shape.size());
  Elems out;
  for (int64_t k = 0; k < perThread(t.getShape()); ++k)
    out.push_back(maskedLoad(v, slot(t.getShape(), k), dims, t.getElementType(), ld.getPadding().convertToDouble()));
  return out;
}

// Attention's Q K^T: Q is loaded before the loop and multiplied by every key tile. Staged
// once here into shared memory the loop's scratch does not reach (scratchBase_ moves past
// it until the loop is lowered), the loop's dot then reads its fragments there and stages
// only its B operand: no copy and no barrier pair for A per iteration, and no registers held
// across the loop for it. Dots whose A comes from an accumulator of their rows
// (aFragsFromAccumulator) or from the loop's own loads are left alone.
int64_t GpuKernelLowering::hoistLoopInvariantA(LoopOp l) {
  Block& body = l.getBody().front();
  const int64_t before = scratchBase_;
  for (Operation& op : body.without_terminator()) {
    auto d = dyn_cast<DotOp>(op);
    if (!d || !mmaLayoutFor(d)) continue;
    Value a = d.getLhs();
    auto at = cast<TileType>(a.getType());
    if (a.getParentBlock() == &body || l->isAncestor(a.getParentBlock()->getParentOp()) ||
        residentA_.count(d.getOperation()))
      continue;
    if (auto it = direct_.find(a); it != direct_.end()) { // global -> shared, no registers
      Value buf = shared(at.getShape()[0] * pitchOf(at), at.getElementType(), 0);
      barrier(); // earlier readers of the scratch are done
      copyGlobalToShared(it->second, at, buf, pitchOf(at));
      b_.create<NVVM::CpAsyncWaitGroupOp>(loc_, 0);
      barrier();
      residentA_[d.getOperation()] = buf;
      scratchBase_ += stagedBytes(at);
      continue;
    }
    if (!tiles_.count(a)) continue;
    const Dist& src = tiles_.at(a);
    if (!src.uniform && src.layout.kind == Layout::Mma) continue; // an accumulator: aFragsFromAccumulator's
    residentA_[d.getOperation()] = stage(src, at, 0, pitchOf(at)); // at the current scratchBase_
    scratchBase_ += stagedBytes(at);
  }
  return before;
}

FailureOr<Elems> GpuKernelLowering::lowerLoopSimple(LoopOp l, ArrayRef<Layout> layouts, ArrayRef<Value> inits) {
  auto yield = cast<YieldOp>(l.getBody().front().getTerminator());
  const int64_t scratchBefore = hoistLoopInvariantA(l);
  // The rings: two slots per ring load past the resident operands; the loop's scratch after.
  SmallVector<Ring> rings = ringLoads(l);
  int64_t ringBytes = 0;
  for (Ring& r : rings) {
    r.offset = scratchBase_ + ringBytes;
    ringBytes += stagedBytes(r.ld.getType());
  }
  const int64_t ringStart = scratchBase_;
  scratchBase_ += 2 * ringBytes;
  Value count = map_.lookup(l.getCount());
  // Slot (iter % 2) of every ring: its buffer.
  auto slotBufs = [&](Value iter) {
    Value slotOff = b_.create<arith::MulIOp>(loc_, b_.create<arith::RemUIOp>(loc_, iter, cidx(2)), cidx(ringBytes));
    SmallVector<Value> bufs;
    for (Ring& r : rings) {
      TileType t = r.ld.getType();
      bufs.push_back(sharedAbs(t.getShape()[0] * pitchOf(t), t.getElementType(),
                               b_.create<arith::AddIOp>(loc_, slotOff, cidx(r.offset)), ringStart + 2 * ringBytes));
    }
    return bufs;
  };
  // Iteration `iter`'s copies (when it exists), then one commit group whether or not.
  auto issue = [&](Value iter) {
    Value exists = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::slt, iter, count);
    auto ifOp = b_.create<scf::IfOp>(loc_, exists, /*withElse=*/false);
    {
      OpBuilder::InsertionGuard guard(b_);
      b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
      SmallVector<Value> bufs = slotBufs(iter);
      for (auto [r, buf] : llvm::zip(rings, bufs)) {
        ViewInfo v = viewOf(r.ld.getView().getDefiningOp<ViewOp>(), [&](Value idx) { return remat(idx, l, iter); });
        copyGlobalToShared(v, r.ld.getType(), buf, pitchOf(r.ld.getType()), /*commit=*/false);
      }
    }
    b_.create<NVVM::CpAsyncCommitGroupOp>(loc_);
  };
  if (!rings.empty()) {
    barrier(); // earlier readers of the scratch the rings take are done
    issue(cidx(0));
  }
  // The prefetched loads' first tiles (iteration 0; past the tensor's edge a load reads its
  // padding, so a loop of no iterations reads nothing it may not) ride with the carried ones.
  SmallVector<LoadOp> ahead = prefetchable(l);
  SmallVector<Value> iterArgs(inits);
  for (LoadOp ld : ahead) {
    Elems first = loadAt(ld, l, cidx(0));
    iterArgs.append(first.begin(), first.end());
  }
  auto loop = b_.create<scf::ForOp>(loc_, cidx(0), map_.lookup(l.getCount()), cidx(1), iterArgs);
  OpBuilder::InsertionGuard guard(b_);
  // With nothing carried, scf.for comes with its yield; we write our own below.
  if (loop.getBody()->mightHaveTerminator()) loop.getBody()->getTerminator()->erase();
  b_.setInsertionPointToEnd(loop.getBody());
  map_.map(l.getInductionVar(), loop.getInductionVar());
  size_t at = 0;
  for (auto [i, carried] : llvm::enumerate(l.getCarried())) {
    size_t n = perThread(cast<TileType>(carried.getType()).getShape(), layouts[i]);
    auto args = loop.getRegionIterArgs().slice(at, n);
    tiles_[carried] = Dist{Elems(args.begin(), args.end()), layouts[i], false};
    at += n;
  }
  // The next iteration's tiles first, so they are in flight while this one computes.
  SmallVector<Value> next;
  Value iv1 = b_.create<arith::AddIOp>(loc_, loop.getInductionVar(), cidx(1));
  if (!rings.empty()) {
    barrier(); // everyone is done with iteration j - 1, whose slots iteration j + 1's copies take
    issue(iv1);
    b_.create<NVVM::CpAsyncWaitGroupOp>(loc_, 1); // this thread's copies for iteration j landed
    barrier();                                    // and everyone's
    for (auto [r, buf] : llvm::zip(rings, slotBufs(loop.getInductionVar()))) {
      ringBuf_[r.ld.getResult()] = buf;
      prefetched_.insert(r.ld);
    }
  }
  for (LoadOp ld : ahead) {
    size_t n = perThread(ld.getType().getShape());
    auto args = loop.getRegionIterArgs().slice(at, n);
    tiles_[ld.getResult()] = Dist{Elems(args.begin(), args.end()), {}, false};
    prefetched_.insert(ld);
    at += n;
    Elems e = loadAt(ld, l, iv1);
    next.append(e.begin(), e.end());
  }
  if (failed(lowerBlock(l.getBody().front()))) return failure();
  SmallVector<Value> yields;
  for (auto [i, v] : llvm::enumerate(yield.getValues())) {
    Elems e = as(tiles_.at(v), cast<TileType>(v.getType()), layouts[i]);
    yields.append(e.begin(), e.end());
  }
  yields.append(next.begin(), next.end());
  b_.create<scf::YieldOp>(loc_, yields);
  b_.setInsertionPointAfter(loop);
  if (!rings.empty()) { // the last iteration's (empty) group, before the scratch is reused
    b_.create<NVVM::CpAsyncWaitGroupOp>(loc_, 0);
    barrier();
  }
  scratchBase_ = scratchBefore; // the resident operands are dead past the loop
  return Elems(loop.getResults().take_front(inits.size()));
}

std::optional<GpuKernelLowering::PipePlan> GpuKernelLowering::pipelinePlan(LoopOp l) {
  if (l.getStages() < 2 || l.getInits().size() != 1) return std::nullopt;
  Block& body = l.getBody().front();
  auto yield = cast<YieldOp>(body.getTerminator());
  auto dot = yield.getValues()[0].getDefiningOp<DotOp>();
  if (!dot || dot.getAcc() != l.getCarried()[0] || !dot->hasOneUse()) return std::nullopt;
  auto a = dot.getLhs().getDefiningOp<LoadOp>(), b = dot.getRhs().getDefiningOp<LoadOp>();
  if (!a || !b || !a->hasOneUse() || !b->hasOneUse() || !a.getPadding().isZero() || !b.getPadding().isZero())
    return std::nullopt;
  // The pipelined loop re-reads the operands each iteration: only right for loads made
  // in the body (a tile loaded before the loop may since have been overwritten).
  if (a->getBlock() != &body || b->getBlock() != &body) return std::nullopt;
  for (Operation& op : body.without_terminator())
    if (!isa<ViewOp, LoadOp, DotOp>(op) && op.getDialect()->getNamespace() != "arith") return std::nullopt;
  for (LoadOp ld : {a, b})
    if (ld.getType().getRank() != 2 || ld.getType().getShape()[1] % 8) return std::nullopt;
  auto layout = mmaLayoutFor(dot);
  if (!layout) return std::nullopt;
  return PipePlan{dot, a, b, *layout};
}

Value GpuKernelLowering::remat(Value v, LoopOp l, Value iv) {
  if (v == l.getInductionVar()) return iv;
  Operation* def = v.getDefiningOp();
  if (!def || def->getBlock() != &l.getBody().front()) return map_.lookup(v);
  IRMapping m;
  for (Value o : def->getOperands()) m.map(o, remat(o, l, iv));
  return b_.clone(*def, m)->getResult(0);
}

// Software pipeline, `stages` deep: the copies for iteration k + stages - 1 are in flight
// while iteration k computes. Each stage has its own A and B buffers; cp.async groups are
// committed one per iteration (empty ones too), so waiting until at most stages-2 groups
// are pending means iteration k's copies (this thread's) landed; the barrier after makes
// everyone's visible and also tells that every thread finished iteration k-1, whose
// buffers the next copies overwrite.
Elems GpuKernelLowering::lowerLoopPipelined(LoopOp l, PipePlan p, const Elems& init) {
  int64_t S = l.getStages();
  TileType at = p.a.getType(), bt = p.b.getType(), ct = p.dot.getType();
  int64_t aBytes = stagedBytes(at), bBytes = stagedBytes(bt);
  int64_t stageBytes = aBytes + bBytes;
  Value count = map_.lookup(l.getCount());
  auto viewAt = [&](LoadOp ld, Value iv) {
    return viewOf(ld.getView().getDefiningOp<ViewOp>(), [&](Value idx) { return remat(idx, l, iv); });
  };
  auto buffers = [&](Value iter) {
    Value slot = b_.create<arith::RemUIOp>(loc_, iter, cidx(S));
    Value off = b_.create<arith::MulIOp>(loc_, slot, cidx(stageBytes));
    Value bufA = sharedAt(at.getShape()[0] * pitchOf(at), at.getElementType(), off, S * stageBytes);
    Value bufB = sharedAt(bt.getShape()[0] * pitchOf(bt), bt.getElementType(),
                          b_.create<arith::AddIOp>(loc_, off, cidx(aBytes)), S * stageBytes);
    return std::make_pair(bufA, bufB);
  };
  auto issue = [&](Value iter) { // copies of iteration `iter`, if it exists; then commit
    Value exists = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::slt, iter, count);
    auto ifOp = b_.create<scf::IfOp>(loc_, exists, /*withElse=*/false);
    {
      OpBuilder::InsertionGuard guard(b_);
      b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
      auto [bufA, bufB] = buffers(iter);
      asyncCopy(viewAt(p.a, iter), at, bufA, pitchOf(at));
      asyncCopy(viewAt(p.b, iter), bt, bufB, pitchOf(bt));
    }
    b_.create<NVVM::CpAsyncCommitGroupOp>(loc_);
  };
  barrier(); // the scratch may hold an earlier op's data still being read
  for (int64_t s = 0; s < S - 1; ++s) issue(cidx(s));
  auto loop = b_.create<scf::ForOp>(loc_, cidx(0), count, cidx(1), ValueRange(init));
  {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(loop.getBody());
    Value kk = loop.getInductionVar();
    b_.create<NVVM::CpAsyncWaitGroupOp>(loc_, S - 2);
    barrier();
    issue(b_.create<arith::AddIOp>(loc_, kk, cidx(S - 1)));
    auto [bufA, bufB] = buffers(kk);
    b_.create<scf::YieldOp>(loc_, ValueRange(mmaLoop(bufA, bufB, at, ct, p.layout, loop.getRegionIterArgs())));
  }
  b_.create<NVVM::CpAsyncWaitGroupOp>(loc_, 0); // drain the trailing (empty) groups
  barrier();
  return Elems(loop.getResults());
}

} // namespace kiln::portable
