// kiln-lower-gemm-sm90: the Hopper GEMM. A tile kernel that GemmMatch recognises gets
// second kernels, `<name>__sm90` and its siblings (one per tile and cluster the options
// select: hopper/Twins.h), beside the portable one kiln-lower-to-gpu makes; the runtime launches one whenever its TMA
// preconditions hold (hopper/Sm90Launch.h). This file: parameters, warp roles, the TMA ring
// and the wgmma main loop, the pass; Epilogue.cpp: the epilogue and the stores of C.
//
// One CTA computes a BM x BN tile of C (128 x 128, 128 x 256, 64 x 128; on request 128 x 192,
// 64 x 192) with 128 threads per 64 rows and 128 more; on request a 64 x 256 tile in
// ping-pong: two consumer warpgroups, each on whole tiles, taking the CTA's in turn
// (takeTurn). A decode twin (Config::swapAB: BM = 16 or 32 rows of C by BN = 64) has one
// consumer warpgroup computing the tile transposed, C^T = B^T A^T: wgmma's A is B's box,
// its B is A's rows, its N is BM (kTile); its C goes out from registers (epilogueSwapped):
//   warpgroup 0 (producer): one thread issues TMA loads of A (BM x 64) and B (64 x BN) into
//     a ring of `stages` 128B-swizzled shared-memory stages; full[s] counts the bytes in,
//     empty[s] counts the consumers' releases. With two consumers, setmaxnreg gives its
//     registers to them (24 kept, 240 each for them), which holds when the module is
//     compiled as a whole program (the runtime has the driver's JIT do that: nvJitLink
//     drops it); with one, 256 threads may hold 255 registers each anyway.
//   warpgroups 1 (and 2) (consumers): each owns 64 rows (of the tile, or in ping-pong of its
//     own tiles); per k-tile it waits for full[s], runs
//     4 x wgmma.mma_async m64nBNk16 (both operands from shared memory through descriptors,
//     f32 accumulators in registers), keeps one wgmma group in flight, and releases the
//     stage before. Then the epilogue: the tile kernel's own elementwise ops, evaluated on
//     each accumulator element where it lives; a 16-bit C goes out by TMA through 64 x 64
//     staging boxes (two per warpgroup), an f32 C by masked stores from registers. A last
//     row (column) of tiles moved up (left) to stay inside A (B) (setTile) writes only its
//     own rows and columns: a 16-bit C's staged boxes copied by the warpgroup (copyBox), an
//     f32 C's stores masked.
// Shared memory (1024-B aligned): per stage A as 128 rows of 128 B (K-major), B as BN/64
// boxes of 64 K-rows x 128 B (MN-major); then the C staging boxes; then the 2 x stages mbarriers.
#include "hopper/Emitter.h"
#include "hopper/Twins.h"
#include "Transforms/Passes.h"

#include "llvm/ADT/DenseSet.h"

namespace kiln {
#define GEN_PASS_DEF_KILNLOWERGEMMSM90
#include "Transforms/Passes.h.inc"
} // namespace kiln

namespace kiln::hopper::detail {

void Emitter::declareParams() {
  MLIRContext* ctx = b_.getContext();
  auto generic = LLVM::LLVMPointerType::get(ctx);
  auto global = LLVM::LLVMPointerType::get(ctx, 1);
  SmallVector<Type> types;
  auto param = [&](LaunchParam p, Type t) {
    plan_.params.push_back(p);
    types.push_back(t);
  };
  // A cluster along N shares A's tile: each CTA loads its share of the rows.
  param({LaunchParam::TensorMap, int(m_.a), 0, {kBK, cfg_.clusterAlongM ? cfg_.bm : cfg_.bm / cfg_.cluster}}, generic);
  param({LaunchParam::TensorMap, int(m_.b), 0, {64, kBK}}, generic);
  if (cfg_.dual) param({LaunchParam::TensorMap, int(m_.b2), 0, {64, kBK}}, generic);
  const bool cByTma = !cfg_.swapAB && m_.kernel.getArgType(m_.c).getElementType().getIntOrFloatBitWidth() == 16;
  // A 16-bit C goes by TMA; its pointer too, for a last row of tiles moved up inside A
  // (setTile), which stores only some of its rows.
  if (cByTma) param({LaunchParam::TensorMap, int(m_.c), 0, {64, 64}}, generic);
  param({LaunchParam::Pointer, int(m_.c), 0, {}}, global);
  param({LaunchParam::Stride, int(m_.c), 0, {}}, b_.getI64Type());
  for (unsigned in : m_.epilogueInputs) {
    param({LaunchParam::Pointer, int(in), 0, {}}, global);
    for (int d = 0; d < m_.kernel.getArgType(in).getRank(); ++d) param({LaunchParam::Stride, int(in), d, {}}, b_.getI64Type());
  }
  param({LaunchParam::Dim, int(m_.a), 0, {}}, b_.getI32Type()); // M
  param({LaunchParam::Dim, int(m_.b), 1, {}}, b_.getI32Type()); // N
  param({LaunchParam::Dim, int(m_.a), 1, {}}, b_.getI32Type()); // K
  // Split-K (persistent CTAs without clusters): the runtime's workspace, how many of C's
  // tiles this launch cuts along K and into how many chunks (Sm90Tiles.h).
  // (The decode twin splits inside clusters instead: no parameters.)
  const bool splitK = cfg_.persistent && cfg_.cluster == 1 && !cfg_.pingpong() && !cfg_.swapAB && !cfg_.dual && cfg_.rowParts() == 1;
  if (splitK) {
    param({LaunchParam::Workspace, 0, 0, {}}, global);
    param({LaunchParam::SplitTiles, 0, 0, {}}, b_.getI32Type());
    param({LaunchParam::KSplits, 0, 0, {}}, b_.getI32Type());
  }

  b_.setInsertionPointToEnd(gm_.getBody());
  std::string name = m_.kernel.getSymName().str() + cfg_.suffix;
  func_ = b_.create<gpu::GPUFuncOp>(loc_, name, b_.getFunctionType(types, {}));
  func_->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b_.getUnitAttr());
  // .maxntid + .minnctapersm: without both, ptxas ignores setmaxnreg.
  func_.setKnownBlockSizeAttr(b_.getDenseI32ArrayAttr({int32_t(cfg_.threads()), 1, 1}));
  func_->setAttr("nvvm.minctasm", b_.getI32IntegerAttr(1));
  Block& entry = func_.getBody().front();
  unsigned i = 0;
  tmA_ = entry.getArgument(i++);
  tmB_ = entry.getArgument(i++);
  if (cfg_.dual) tmB2_ = entry.getArgument(i++);
  if (cByTma) tmC_ = entry.getArgument(i++);
  cPtr_ = entry.getArgument(i++);
  cStride_ = entry.getArgument(i++);
  for (unsigned in : m_.epilogueInputs) {
    auto& [ptr, strides] = inputs_[in];
    ptr = entry.getArgument(i++);
    for (int d = 0; d < m_.kernel.getArgType(in).getRank(); ++d) strides.push_back(entry.getArgument(i++));
  }
  M_ = entry.getArgument(i++);
  N_ = entry.getArgument(i++);
  K_ = entry.getArgument(i++);
  if (splitK) {
    ws_ = entry.getArgument(i++);
    skTiles_ = entry.getArgument(i++);
    kSplits_ = entry.getArgument(i++);
  }

  plan_.entry = name;
  plan_.threads = cfg_.threads();
  plan_.sharedBytes = cfg_.smemBytes();
  plan_.tileM = cfg_.bm;
  plan_.tileN = cfg_.outN();
  plan_.tileK = kBK;
  plan_.stages = cfg_.stages;
  plan_.output = int(m_.c);
  plan_.cluster = cfg_.cluster;
  plan_.clusterAlongM = cfg_.cluster > 1 && cfg_.clusterAlongM;
  plan_.raster = cfg_.rasterGroup;
  plan_.swapAB = cfg_.swapAB;
  plan_.products = cfg_.dual ? 2 : 1;
  auto dimName = [&](unsigned arg, unsigned d) {
    tile::TensorArgType t = m_.kernel.getArgType(arg);
    return t.getDimSymbol(d).empty() ? std::to_string(t.getDimConstant(d)) : t.getDimSymbol(d).str();
  };
  plan_.gridDims = {{int(m_.a), 0, cfg_.bm, dimName(m_.a, 0)}, {int(m_.b), 1, cfg_.outN(), dimName(m_.b, 1)}};
  plan_.persistent = cfg_.persistent;
  const bool kClusters = cfg_.swapAB && !cfg_.wideSwap();
  if (splitK || kClusters) plan_.reduction = {int(m_.a), 1, kBK, dimName(m_.a, 1)};
  if (kClusters) plan_.kCluster = kKClusterMax;
}

void Emitter::run() {
  declareParams();
  // The epilogue's loads, each once, found from the stored value down to the accumulator.
  SmallVector<Value> work{m_.store.getValue()};
  DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (v == m_.loop.getResult(0) || !seen.insert(v).second) continue;
    if (v.getDefiningOp<LoadOp>()) epilogueLoads_.push_back(v);
    else if (Operation* op = v.getDefiningOp()) llvm::append_range(work, op->getOperands());
  }
  MLIRContext* ctx = b_.getContext();
  b_.setInsertionPointToStart(gm_.getBody());
  if (!gm_.lookupSymbol("kiln_sm90_smem"))
    b_.create<LLVM::GlobalOp>(loc_, LLVM::LLVMArrayType::get(b_.getI8Type(), 0), /*isConstant=*/false,
                              LLVM::Linkage::External, "kiln_sm90_smem", Attribute(), /*alignment=*/1024,
                              /*addrSpace=*/3);
  b_.setInsertionPointToStart(&func_.getBody().front());
  tid_ = b_.create<arith::IndexCastOp>(loc_, b_.getI32Type(), b_.create<gpu::ThreadIdOp>(loc_, gpu::Dimension::x));
  wg_ = divu(tid_, i32(128));
  tilesM_ = divu(add(M_, i32(cfg_.bm - 1)), i32(cfg_.bm));
  tilesN_ = divu(add(N_, i32(cfg_.outN() - 1)), i32(cfg_.outN()));
  numTiles_ = mul(tilesM_, tilesN_);
  // A cluster of s is CTAs sc .. sc + s - 1 of the 1-D grid; its work units are s
  // horizontally adjacent tiles (or, with 2, vertically adjacent ones).
  Value bidx = b_.create<arith::IndexCastOp>(loc_, b_.getI32Type(), b_.create<gpu::BlockIdOp>(loc_, gpu::Dimension::x));
  rank_ = cfg_.cluster == 1 ? i32(0) : remu(bidx, i32(cfg_.cluster));
  kTiles_ = divu(add(K_, i32(kBK - 1)), i32(kBK));

  // The dynamic shared memory, rounded up to 1024 B: 128B-swizzle atoms and the wgmma
  // descriptors assume it, whatever alignment the loader gives.
  auto shared = LLVM::LLVMPointerType::get(ctx, 3);
  Value raw = b_.create<LLVM::AddressOfOp>(loc_, shared, "kiln_sm90_smem");
  Value rawAddr = b_.create<LLVM::PtrToIntOp>(loc_, b_.getI32Type(), raw);
  sbase_ = b_.create<arith::AndIOp>(loc_, add(rawAddr, i32(1023)), i32(-1024));
  smem_ = byteAt(raw, sub(sbase_, rawAddr));

  // K-clusters: the launch's cluster size and this CTA's rank (1 and 0 without a cluster).
  if (cfg_.swapAB) {
    kSize_ = b_.create<NVVM::ClusterDim>(loc_, b_.getI32Type());
    kRank_ = b_.create<NVVM::ClusterId>(loc_, b_.getI32Type());
  }
  // full[s]: one arrival (the producer's expect_tx) + the bytes; empty[s]: every consumer thread.
  // K-clusters: sums, each peer warp once per tile; free, rank 0's 4 warps once per tile.
  Value isThread0 = eq(tid_, i32(0));
  ifThen(isThread0, [&] {
    for (int64_t s = 0; s < cfg_.stages; ++s) {
      b_.create<NVVM::MBarrierInitOp>(loc_, sharedPtr(i32(cfg_.barrierOffset() + 8 * s)), i32(1), Value());
      b_.create<NVVM::MBarrierInitOp>(loc_, sharedPtr(i32(cfg_.barrierOffset() + 8 * (cfg_.stages + s))),
                                      i32(cfg_.emptyArrivals()), Value());
    }
    if (cfg_.swapAB) {
      Value peers = b_.create<arith::MaxUIOp>(loc_, sub(kSize_, i32(1)), i32(1));
      b_.create<NVVM::MBarrierInitOp>(loc_, sumsBarrier(), mul(peers, i32(4)), Value());
      b_.create<NVVM::MBarrierInitOp>(loc_, freeBarrier(), i32(4), Value());
    }
    b_.create<NVVM::FenceMbarrierInitOp>(loc_);
  });
  // The peer's barriers are initialised before anyone arrives on them or multicasts to them:
  // in a cluster, fence.mbarrier_init (release) then a relaxed arrive here, and each role
  // waits where it first needs the peer (the producer after prefetching its tensor maps), so
  // the set-up between costs nothing; alone, the CTA's barrier. The cluster barrier's only
  // phase (see the end).
  // K-clusters: a peer arrives on rank 0's barriers (and rank 0 on a peer's) only after
  // its first item, but nothing else orders that after their initialisation: every thread
  // waits here (without a cluster, as the CTA's barrier).
  if (cfg_.cluster > 1 || cfg_.swapAB) b_.create<NVVM::ClusterArriveRelaxedOp>(loc_, UnitAttr());
  else b_.create<gpu::BarrierOp>(loc_);
  if (cfg_.swapAB) clusterWait();

  ifThenElse(
      eq(wg_, i32(0)),
      [&] { producer(); },
      [&] {
        if (cfg_.consumers() == 2)
          b_.create<NVVM::SetMaxRegisterOp>(loc_, int32_t(consumerRegisters(cfg_.threads(), kGemmProducerRegs)),
                                            NVVM::SetMaxRegisterAction::increase);
        if (cfg_.cluster > 1) clusterWait();
        forEachTile([&] {
          preloadColumnInputs();
          // Not the CTA's first item (items before it put base_ past 0): the other
          // consumer's main loop runs before this one's.
          if (cfg_.pingpong()) ifThen(ult(i32(0), base_), [&] { takeTurn(/*arrive=*/false); });
          Value acc = consumerMainloop();
          // Another item follows (one CTA step, half this loop's, on): its consumer's main
          // loop runs next. Computed from values the loop keeps anyway: registers are tight.
          if (cfg_.pingpong())
            ifThen(ult(add(turn_.item, b_.create<arith::ShRUIOp>(loc_, turn_.loopStep, i32(1))), turn_.units),
                   [&] { takeTurn(/*arrive=*/true); });
          if (cfg_.swapAB && !cfg_.wideSwap()) {
            auto [sum, mine] = clusterFixup(acc);
            return ifThen(mine, [&] { epilogue(sum); });
          }
          if (!skTiles_) return epilogue(acc); // (a wide swapped twin: whole tiles)
          auto [sum, mine] = splitKFixup(acc);
          ifThen(mine, [&] { epilogue(sum); });
        }, /*inTurn=*/true);
        // The last boxes' stores have read their staging buffers before the CTA (and its
        // shared memory) goes away. Only read: their writes to C are the grid's, complete
        // when the kernel is; waiting for them here put a round trip to memory on every
        // CTA's tail.
        if (tmC_)
          ifThen(eq(remu(tid_, i32(128)), i32(0)),
                 [&] { b_.create<NVVM::CpAsyncBulkWaitGroupOp>(loc_, b_.getI32IntegerAttr(0), b_.getUnitAttr()); });
      });
  // No cluster barrier before leaving: a CTA's peer touches its shared memory only by
  // multicast copies, which its consumers wait for, and by frees its producer waits for
  // (release() makes no other), so none is in flight once it is done. A second phase would
  // also let a thread arrive for it while a slower one has yet to wait on the first.
  b_.create<gpu::ReturnOp>(loc_);
  func_->setAttr(kLaunchPlanAttr, StringAttr::get(ctx, plan_.toJson().dump()));
  func_->setAttr("kiln.layouts", b_.getDictionaryAttr({b_.getNamedAttr("a", aShared_), b_.getNamedAttr("b", bShared_),
                                                        b_.getNamedAttr("acc", acc_),
                                                        b_.getNamedAttr("c", tmC_ ? Attribute(cShared_) : Attribute(acc_))}));
}

/// The persistent loop: CTA b takes tiles b, b + grid, b + 2 grid, ... of C (a grid of one
/// CTA per tile takes exactly one), in setTile's order.
///
/// With split tiles (skTiles_ > 0) only the tiles before the last skTiles_ go this way;
/// then the CTA takes the split tiles' chunks u = b, b + grid, ... (Sm90Tiles.h: chunk j of
/// split tile t is u = j skTiles_ + t, its k-steps [j kTiles / s, (j + 1) kTiles / s)).
/// Index math stays 32-bit: a 64-bit division is a ptxas subroutine call, and any call
/// serialises every wgmma of the kernel.
///
/// With a cluster the loop runs over clusters and work units instead: cluster c takes
/// units c, c + clusters, ...; a unit is `cluster` horizontally adjacent tiles, the CTA of
/// rank r taking tile column cluster u + r (vertically adjacent ones along M: tile row 2u + r).
/// Past C's last column (row) that CTA still loads (zeros) and multiplies, so all keep the
/// same ring schedule, and stores nothing.
template <class F> void Emitter::forEachTile(F&& body, bool inTurn) {
  const int64_t cl = cfg_.cluster;
  Value bid = b_.create<arith::IndexCastOp>(loc_, b_.getI32Type(), b_.create<gpu::BlockIdOp>(loc_, gpu::Dimension::x));
  Value grid = b_.create<arith::IndexCastOp>(loc_, b_.getI32Type(), b_.create<gpu::GridDimOp>(loc_, gpu::Dimension::x));
  kBegin_ = i32(0);
  kEnd_ = kTiles_;
  if (cfg_.swapAB) {
    // K-clusters (Sm90Tiles.h): cluster c takes tiles c, c + clusters, ...; rank r of s
    // their k-steps [r kTiles / s, (r + 1) kTiles / s). Without a cluster: s = 1, r = 0.
    Value first = divu(bid, kSize_), step = divu(grid, kSize_);
    kBegin_ = divu(mul(kRank_, kTiles_), kSize_);
    kEnd_ = divu(mul(add(kRank_, i32(1)), kTiles_), kSize_);
    Value units = mul(tilesM_, tilesN_);
    auto loop = b_.create<scf::ForOp>(loc_, first, units, step);
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPoint(loop.getBody()->getTerminator());
    Value t = loop.getInductionVar();
    setTile(t, tilesM_, tilesN_);
    itemIndex_ = divu(sub(t, first), step);
    hasNext_ = ult(add(t, step), units);
    base_ = mul(itemIndex_, sub(kEnd_, kBegin_));
    body();
    return;
  }
  if (skTiles_) {
    OpBuilder::InsertionGuard g(b_);
    Value dpTiles = sub(numTiles_, skTiles_);
    // Whole tiles this CTA takes: bid, bid + grid, ... below dpTiles.
    Value nDp = b_.create<arith::SelectOp>(loc_, ult(bid, dpTiles), divu(add(sub(dpTiles, bid), sub(grid, i32(1))), grid),
                                           i32(0));
    // Divisors of at least 1: with no split tiles the loop never takes a chunk, but the
    // selects below still compute one.
    Value one = i32(1);
    Value splitTiles = b_.create<arith::MaxUIOp>(loc_, skTiles_, one);
    Value splits = b_.create<arith::MaxUIOp>(loc_, kSplits_, one);
    Value chunks = mul(skTiles_, kSplits_);
    Type i32t = b_.getI32Type();
    auto loop = b_.create<scf::WhileOp>(loc_, TypeRange{i32t, i32t, i32t}, ValueRange{i32(0), bid, i32(0)});
    {
      Block* before = b_.createBlock(&loop.getBefore(), {}, {i32t, i32t, i32t}, {loc_, loc_, loc_});
      b_.setInsertionPointToStart(before);
      Value more = b_.create<arith::OrIOp>(loc_, ult(before->getArgument(0), nDp), ult(before->getArgument(1), chunks));
      b_.create<scf::ConditionOp>(loc_, more, before->getArguments());
    }
    Block* after = b_.createBlock(&loop.getAfter(), {}, {i32t, i32t, i32t}, {loc_, loc_, loc_});
    b_.setInsertionPointToStart(after);
    Value i = after->getArgument(0), u = after->getArgument(1), base = after->getArgument(2);
    Value isDp = ult(i, nDp);
    auto sel = [&](Value c, Value a, Value b) { return b_.create<arith::SelectOp>(loc_, c, a, b).getResult(); };
    // A chunk's tile and k-steps, computed only for chunks (whole tiles need none of it).
    auto chunk = b_.create<scf::IfOp>(loc_, TypeRange{i32t, i32t, i32t, i32t}, isDp, /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard cg(b_);
      b_.setInsertionPointToStart(chunk.thenBlock());
      b_.create<scf::YieldOp>(loc_, ValueRange{add(bid, mul(i, grid)), i32(0), kTiles_, i32(0)});
      b_.setInsertionPointToStart(chunk.elseBlock());
      Value t = remu(u, splitTiles), j = divu(u, splitTiles);
      b_.create<scf::YieldOp>(loc_, ValueRange{add(dpTiles, t), divu(mul(j, kTiles_), splits),
                                               divu(mul(add(j, one), kTiles_), splits), t});
    }
    Value skTile = chunk.getResult(3);
    setTile(chunk.getResult(0), tilesM_, tilesN_);
    kBegin_ = chunk.getResult(1);
    kEnd_ = chunk.getResult(2);
    base_ = base;
    partial_ = b_.create<arith::XOrIOp>(loc_, isDp, b_.create<arith::ConstantIntOp>(loc_, 1, 1));
    skUnit_ = u;
    skTile_ = skTile;
    body();
    Value steps = sub(kEnd_, kBegin_);
    b_.create<scf::YieldOp>(loc_, ValueRange{sel(isDp, add(i, one), i), sel(isDp, u, add(u, grid)), add(base, steps)});
    return;
  }
  Value first = cl == 1 ? bid : divu(bid, i32(cl)), step = cl == 1 ? grid : divu(grid, i32(cl));
  const bool alongM = cl > 1 && cfg_.clusterAlongM;
  Value unitsN = cl == 1 || alongM ? tilesN_ : divu(add(tilesN_, i32(cl - 1)), i32(cl));
  Value unitsM = alongM ? divu(add(tilesM_, i32(cl - 1)), i32(cl)) : tilesM_;
  // Ping-pong: consumer warpgroup c takes items c, c + 2, ... of the CTA's (the producer
  // loads all of them, in order); base_ still counts every item before this one.
  const bool alternate = inTurn && cfg_.pingpong();
  Value start = alternate ? add(first, mul(sub(wg_, i32(1)), step)) : first;
  Value units = mul(unitsM, unitsN);
  Value loopStep = alternate ? mul(step, i32(2)) : step;
  // The CTA's items (every one, in ping-pong too): first, first + step, ... below units.
  Value ctaItems = b_.create<arith::SelectOp>(loc_, ult(first, units), divu(add(sub(units, first), sub(step, i32(1))), step),
                                              i32(0));
  totalIters_ = mul(ctaItems, kTiles_);
  auto loop = b_.create<scf::ForOp>(loc_, start, units, loopStep);
  OpBuilder::InsertionGuard g(b_);
  b_.setInsertionPoint(loop.getBody()->getTerminator());
  Value t = loop.getInductionVar();
  if (alternate) turn_ = {t, units, loopStep};
  setTile(t, unitsM, unitsN);
  base_ = mul(divu(sub(t, first), step), kTiles_);
  body();
}

void Emitter::setTile(Value t, Value rows, Value columns) {
  const int64_t kGroup = cfg_.rasterGroup;
  Value perGroup = mul(columns, i32(kGroup));
  Value group = divu(t, perGroup);
  Value firstM = mul(group, i32(kGroup));
  Value groupRows = b_.create<arith::MinUIOp>(loc_, sub(rows, firstM), i32(kGroup));
  Value local = remu(t, perGroup);
  Value row = add(firstM, remu(local, groupRows));
  Value column = divu(local, groupRows);
  // A cluster's unit is `cluster` adjacent tiles: rank r takes the unit's r-th column (or
  // row, along M).
  auto rankTh = [&](Value u) { return add(mul(u, i32(cfg_.cluster)), rank_); };
  const bool alongM = cfg_.cluster > 1 && cfg_.clusterAlongM, alongN = cfg_.cluster > 1 && !cfg_.clusterAlongM;
  m0_ = mul(alongM ? rankTh(row) : row, i32(cfg_.bm));
  n0_ = mul(alongN ? rankTh(column) : column, i32(cfg_.outN()));
  // The last row of tiles, where it runs past C's last row, loads C's last tileM rows
  // instead, and its epilogue stores only the rows from m0_ on: TMA then fills no row of A's
  // box out of bounds, which slowed the whole launch (decode twins, H200, 2026-12-01, + bias
  // + ReLU: 65 x 4096 x 14336 50.5 -> 38.5 us, 100 x 2048 x 4096 14.6 -> 12.4; the 128 x 256
  // tile on an H100, 2026-12-06: 4097 x 4096 x 4096 178-187 us against 174.5 at 4224 rows,
  // whose 33 rows of tiles are all whole). A C of fewer rows than the tile keeps its box at
  // row 0. All CTAs of a cluster side by side share m0_, so they move alike.
  // (A tile of `size` at `origin` moved to end at `extent`'s last, where the extent holds one.)
  auto inside = [&](Value origin, int64_t size, Value extent) -> Value {
    Value s = i32(size);
    return b_.create<arith::SelectOp>(loc_, ule(s, extent), b_.create<arith::MinUIOp>(loc_, origin, sub(extent, s)), origin);
  };
  aM0_ = inside(m0_, cfg_.bm, M_);
  // Likewise the last column of tiles loads B's last tileN columns, and stores only the
  // columns from n0_ on: no B box is filled with zeros (H100, 2026-12-06: 4096 x 4104 x 4096
  // 239.5 -> 235.5 us, 4096 x 4160 x 4096 212 -> 210; what is left there is B's row pitch and
  // rounds, docs/benchmarks/2026-12-06-hopper-gemm-ragged-columns). Stacked pairs share n0_; a
  // cluster's CTA past C's last column loads inside B too and stores nothing. (The decode
  // twins keep theirs: their tile is 64 columns of C^T's rows.)
  bN0_ = cfg_.swapAB ? n0_ : inside(n0_, cfg_.outN(), N_);
}

void Emitter::takeTurn(bool arrive) {
  // Named barriers 3 and 4 (0 is the CTA's, 1 and 2 the consumers' epilogues): consumer
  // warpgroup c waits on 3 + c and hands the turn on through the other's.
  Value c = sub(wg_, i32(1));
  Value id = add(i32(3), arrive ? sub(i32(1), c) : c);
  if (arrive) b_.create<NVVM::BarrierArriveOp>(loc_, id, i32(256));
  else b_.create<NVVM::BarrierOp>(loc_, Type(), id, i32(256), NVVM::BarrierReductionAttr(), Value());
}

// Not .aligned: the producer warp's lanes wait after a branch only lane 0 takes.
void Emitter::clusterWait() { b_.create<NVVM::ClusterWaitOp>(loc_, UnitAttr()); }

void Emitter::producer() {
  // With one consumer (256 threads) every thread may hold 255 registers: nothing to move.
  if (cfg_.consumers() == 2)
    b_.create<NVVM::SetMaxRegisterOp>(loc_, kGemmProducerRegs, NVVM::SetMaxRegisterAction::decrease);
  // The tensor maps live in parameter space: fetch their lines now rather than at the first
  // copy of each (CUTLASS does the same), before waiting for the peer.
  ifThen(eq(tid_, i32(0)), [&] {
    for (Value map : {tmA_, tmB_, tmB2_, tmC_})
      if (map)
        b_.create<NVVM::PrefetchOp>(loc_, NVVM::PrefetchCacheLevelAttr(), NVVM::CacheEvictionPriorityAttr(), map,
                                    Value(), /*tensormap=*/true, /*uniform=*/false, /*in_param_space=*/true);
  });
  if (cfg_.cluster > 1) clusterWait();
  ifThen(eq(tid_, i32(0)), [&] {
  // L2 policy per operand: each of A's tiles is read by tilesN CTAs, each of B's by tilesM.
  // Where the operand read more often fits 12 MiB (16-bit elements; about a quarter of the
  // smallest sm_90 L2, 50 MB), it is marked evict_last and the other evict_first, so a stream
  // of tiles read once (a decode GEMM's weights) does not push the reused one out. Where it
  // does not fit (4096^3 and up: both reused alike), evict_normal, as without a hint.
  // 1.08-1.15x at 128x12288x4096, 12288x128x4096 and 16x4096x4096 on the H200
  // (docs/benchmarks/2026-12-01-h200-hopper-gemm-l2-policy). The values are
  // createpolicy.fractional's 64-bit encodings at fraction 1.0 (PTX ISA, "createpolicy").
  const int64_t kEvictNormal = 0x1000000000000000ll, kEvictFirst = 0x12F0000000000000ll,
                kEvictLast = 0x14F0000000000000ll, kReusedBytes = 12ll << 20;
  Value aReused = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::uge, tilesN_, tilesM_);
  Value reusedRows = ext64(b_.create<arith::SelectOp>(loc_, aReused, M_, N_));
  // (Two products: B's bytes are B's and B2's.)
  Value bytesPerRow = cfg_.dual ? Value(b_.create<arith::SelectOp>(loc_, aReused, i64(2), i64(4))) : i64(2);
  Value reusedBytes = b_.create<arith::MulIOp>(loc_, b_.create<arith::MulIOp>(loc_, reusedRows, ext64(K_)), bytesPerRow);
  Value fits = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::ule, reusedBytes, i64(kReusedBytes));
  auto select = [&](Value c, Value x, Value y) { return Value(b_.create<arith::SelectOp>(loc_, c, x, y)); };
  Value policyA = select(fits, select(aReused, i64(kEvictLast), i64(kEvictFirst)), i64(kEvictNormal));
  Value policyB = select(fits, select(aReused, i64(kEvictFirst), i64(kEvictLast)), i64(kEvictNormal));
  forEachTile([&] {
    auto loop = b_.create<scf::ForOp>(loc_, kBegin_, kEnd_, i32(1));
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPoint(loop.getBody()->getTerminator());
    Value kt = loop.getInductionVar();
    auto [s, phase] = slotOf(add(base_, sub(kt, kBegin_)));
    Value full = fullBarrier(s);
    Value empty = emptyBarrier(s);
    // The first pass over the ring waits on the phase before the barrier's first one,
    // which counts as complete: it does not block.
    b_.create<NVVM::MBarrierTryWaitParityOp>(loc_, empty, b_.create<arith::XOrIOp>(loc_, phase, i32(1)),
                                             i32(10000000));
    b_.create<NVVM::MBarrierArriveExpectTxOp>(loc_, Type(), full, i32(cfg_.stageBytes()), NVVM::MemScopeKind::CTA,
                                              false, Value());
    auto cluster = LLVM::LLVMPointerType::get(b_.getContext(), 7);
    Value stage = mul(s, i32(cfg_.stageBytes()));
    Value k0 = mul(kt, i32(kBK));
    // A TMA load into this CTA's stage, or with `multicast` into the same place in every CTA
    // of the cluster (each full[s] counts the whole stage's bytes, its peers' shares included).
    auto tma = [&](Value dstOff, Value map, SmallVector<Value> coords, bool multicast = false) {
      Value dst = b_.create<LLVM::AddrSpaceCastOp>(loc_, cluster, sharedPtr(dstOff));
      Value mask = multicast ? b_.create<arith::ConstantIntOp>(loc_, (1 << cfg_.cluster) - 1, 16) : Value();
      Value policy = map == tmA_ ? policyA : policyB;
      b_.create<NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp>(loc_, dst, map, coords, full, ValueRange{}, mask,
                                                                policy, NVVM::TMALoadMode::TILE, false,
                                                                NVVM::CTAGroupKindAttr(), Value());
    };
    // Coordinates are innermost first: A's box at (k0, aM0), B's boxes at (bN0 + 64h, k0).
    if (cfg_.cluster == 1 || cfg_.clusterAlongM) {
      tma(stage, tmA_, {k0, aM0_});
    } else {
      // This CTA's share of A's rows, multicast.
      const int64_t rows = cfg_.bm / cfg_.cluster;
      tma(add(stage, mul(rank_, i32(rows * 128))), tmA_, {k0, add(aM0_, mul(rank_, i32(rows)))}, true);
    }
    const int64_t boxes = cfg_.bn / 64;
    if (cfg_.cluster > 1 && cfg_.clusterAlongM) {
      // This CTA's share of B's boxes, multicast: h = j x cluster + rank. Where they do not
      // split evenly (three of a 192-wide tile) the last j's h may lie past the tile.
      for (int64_t j = 0; j * cfg_.cluster < boxes; ++j) {
        Value h = add(i32(j * cfg_.cluster), rank_);
        auto load = [&] {
          tma(add(stage, add(i32(cfg_.aBytes()), mul(h, i32(kBoxBytes)))), tmB_, {add(bN0_, mul(h, i32(64))), k0}, true);
        };
        if ((j + 1) * cfg_.cluster <= boxes) load();
        else ifThen(ult(h, i32(boxes)), load);
      }
    } else {
      // Two products: the first half of the boxes from B, the second from B2, over the same
      // columns of C.
      const int64_t half = cfg_.dual ? boxes / 2 : boxes;
      for (int64_t h = 0; h < boxes; ++h)
        tma(add(stage, i32(cfg_.aBytes() + h * kBoxBytes)), h < half ? tmB_ : tmB2_, {add(bN0_, i32(64 * (h % half))), k0});
    }
  }); });
}

Value Emitter::kTile(Value j, Value acc, bool first) {
  auto [s, phase] = slotOf(add(base_, j));
  b_.create<NVVM::MBarrierTryWaitParityOp>(loc_, fullBarrier(s), phase, i32(10000000));
  // Descriptor start addresses: (shared address >> 4) & 0x3FFF. This consumer's first 64
  // rows of A start rowBlock() x 64 x 128 B into the stage.
  Value stageAddr = add(sbase_, mul(s, i32(cfg_.stageBytes())));
  Value aAddr = add(stageAddr, mul(rowBlock(), i32(64 * 128)));
  // (A wide swapped twin: this consumer's own box of B's two.)
  Value bAddr = add(stageAddr, cfg_.wideSwap() ? add(i32(cfg_.aBytes()), mul(colBlock(), i32(kBoxBytes)))
                                               : i32(cfg_.aBytes()));
  auto field = [&](Value addr) {
    return ext64(b_.create<arith::AndIOp>(loc_, b_.create<arith::ShRUIOp>(loc_, addr, i32(4)), i32(0x3FFF)));
  };
  Value descA = b_.create<arith::OrIOp>(loc_, i64(aShared_.descriptorBits(kBoxBytes)), field(aAddr));
  Value descB = b_.create<arith::OrIOp>(loc_, i64(bShared_.descriptorBits(kBoxBytes)), field(bAddr));
  b_.create<NVVM::WgmmaFenceAlignedOp>(loc_);
  auto type = m_.inElt.isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
  auto shape = NVVM::MMAShapeAttr::get(b_.getContext(), 64, int(cfg_.mmaN()), 16);
  // The decode twin swaps the operands: wgmma's A is B's 64-column box (MN-major, read
  // transposed: layout col), its B is A's tile (K-major: layout col).
  const bool swap = cfg_.swapAB;
  auto layoutA = swap ? NVVM::MMALayout::col : NVVM::MMALayout::row;
  auto layoutB = swap ? NVVM::MMALayout::col : NVVM::MMALayout::row;
  const int64_t parts = cfg_.rowParts(), n = partElements();
  for (int64_t kk = 0; kk < kBK / 16; ++kk) {
    // k16 steps: A (K-major) advances 32 B inside its swizzled rows; B (MN-major) 16 rows of 128 B.
    Value da = kk ? add(descA, i64(kk * 32 >> 4)) : descA;
    Value db = kk ? add(descB, i64(kk * 16 * 128 >> 4)) : descB;
    auto mma = [&](Type t, Value d, Value a) {
      return b_.create<NVVM::WgmmaMmaAsyncOp>(
          loc_, t, d, swap ? db : a, swap ? a : db, shape, type, type, NVVM::WGMMATypes::f32,
          first && kk == 0 ? NVVM::WGMMAScaleOut::zero : NVVM::WGMMAScaleOut::one, NVVM::WGMMAScaleIn::one,
          NVVM::WGMMAScaleIn::one, layoutA, layoutB, NVVM::MMAIntOverflowAttr());
    };
    if (parts == 1) {
      acc = mma(accType(), acc, da);
      continue;
    }
    // The tall tile: part p's 64 rows of A lie p x 64 rows of 128 B further; both parts
    // read the same B. Each part's fragment goes through wgmma as a struct of its own.
    for (int64_t p = 0; p < parts; ++p) {
      Value part = b_.create<LLVM::UndefOp>(loc_, fragmentType(n));
      for (int64_t e = 0; e < n; ++e)
        part = b_.create<LLVM::InsertValueOp>(loc_, part, b_.create<LLVM::ExtractValueOp>(loc_, acc, ArrayRef<int64_t>{p * n + e}),
                                              ArrayRef<int64_t>{e});
      part = mma(fragmentType(n), part, p ? add(da, i64(p * 64 * 128 >> 4)) : da);
      for (int64_t e = 0; e < n; ++e)
        acc = b_.create<LLVM::InsertValueOp>(loc_, acc, b_.create<LLVM::ExtractValueOp>(loc_, part, ArrayRef<int64_t>{e}),
                                             ArrayRef<int64_t>{p * n + e});
    }
  }
  b_.create<NVVM::WgmmaGroupSyncAlignedOp>(loc_);
  return acc;
}

Value Emitter::consumerMainloop() {
  // k-step 0 is peeled: its first wgmma overwrites an undefined accumulator (scale-d = 0), so
  // no zeroing moves land between wgmma.fence and the wgmma. An empty item (K = 0) never
  // gets here (the runtime launches the portable kernel then), but stays defined: zero.
  Value steps = sub(kEnd_, kBegin_);
  return ifValue(
      accType(), ult(i32(0), steps),
      [&] {
        Value first = kTile(i32(0), b_.create<LLVM::UndefOp>(loc_, accType()), true);
        auto loop = b_.create<scf::ForOp>(loc_, i32(1), steps, i32(1), ValueRange{first});
        {
          OpBuilder::InsertionGuard g(b_);
          b_.setInsertionPointToStart(loop.getBody());
          Value j = loop.getInductionVar();
          Value acc = kTile(j, loop.getRegionIterArgs()[0], false);
          // One wgmma group stays in flight; the one before it is done: release its stage.
          b_.create<NVVM::WgmmaWaitGroupSyncOp>(loc_, 1);
          release(sub(add(base_, j), i32(1)));
          b_.create<scf::YieldOp>(loc_, acc);
        }
        // The last k-step's stage goes back to the producer too: it fills the next item.
        b_.create<NVVM::WgmmaWaitGroupSyncOp>(loc_, 0);
        release(sub(add(base_, steps), i32(1)));
        return loop.getResult(0);
      },
      [&] { return Value(b_.create<LLVM::ZeroOp>(loc_, accType())); });
}

} // namespace kiln::hopper::detail

namespace kiln::hopper {

using namespace mlir;
using namespace kiln::tile;
using detail::Config;
using detail::Emitter;

namespace {

struct LowerGemmSm90Pass : kiln::impl::KilnLowerGemmSm90Base<LowerGemmSm90Pass> {
  using KilnLowerGemmSm90Base::KilnLowerGemmSm90Base;
  void runOnOperation() override {
    ModuleOp m = getOperation();
    std::string broken = checkTwinOptions({tileM, tileN, stages, cluster, clusterM, rasterGroup},
                                                {"tile-m", "tile-n", "stages", "cluster", "cluster-m", "raster-group"});
    if (broken.empty() && decodeRows != 0 && decodeRows != 16 && decodeRows != 32 && decodeRows != 48 && decodeRows != 64)
      broken = "decode-rows must be 0, 16, 32, 48 or 64, got " + std::to_string(decodeRows);
    if (broken.empty() && wideRows != 0 && (wideRows < 80 || wideRows > kWideRows || wideRows % 16 != 0))
      broken = "wide-rows must be 0, 80, 96, 112 or 128, got " + std::to_string(wideRows);
    if (!broken.empty()) {
      m.emitError(broken);
      return signalPassFailure();
    }
    // Which twins (hopper/Twins.h), each with its ring: `stages`, or the deepest that fits.
    SmallVector<Config> configs;
    for (const TwinShape& t : selectTwins(tileM, tileN, cluster, clusterM, decodeRows, wideRows)) {
      const int64_t deepest = maxStages(t.bm, t.bn, t.swapAB);
      const int64_t own = t.stages ? std::min(t.stages, deepest) : t.swapAB && t.bn == 64 ? std::min(kDecodeStages, deepest) : deepest;
      Config cfg{t.bm, t.bn, stages ? stages : own, persistent, t.suffix, t.cluster};
      cfg.clusterAlongM = t.clusterAlongM;
      cfg.swapAB = t.swapAB;
      cfg.rasterGroup = rasterGroup ? rasterGroup : 8;
      configs.push_back(cfg);
    }
    for (KernelOp k : llvm::to_vector(m.getOps<KernelOp>())) {
      GemmMatch match;
      std::string why;
      if (!matchGemm(k, match, why)) {
        m->setAttr("kiln.sm90", StringAttr::get(&getContext(), "kernel '" + k.getSymName().str() + "': " + why));
        continue;
      }
      OpBuilder b(&getContext());
      m->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), b.getUnitAttr());
      auto gm = m.lookupSymbol<gpu::GPUModuleOp>("kiln");
      if (!gm) {
        b.setInsertionPointToEnd(m.getBody());
        gm = b.create<gpu::GPUModuleOp>(m.getLoc(), "kiln");
      }
      int made = 0;
      for (const Config& cfg : configs) {
        // A ping-pong consumer holds its 128 accumulators within the 168 registers of a
        // 384-thread CTA; a residual's loads beside them spill.
        if (cfg.pingpong() && readsRowInputs(match)) continue;
        // Two products take lone tiles of the plain kind, 128 or 256 wide (C's half of that a
        // whole number of 64-column boxes): no clusters, ping-pong or decode twin, and no
        // split-K (declareParams).
        // (Nor the tall tile, not yet tried with them.)
        if (match.dual && (cfg.cluster > 1 || cfg.pingpong() || cfg.swapAB || cfg.bn % 128 != 0 || cfg.rowParts() > 1))
          continue;
        Config twin = cfg;
        twin.dual = match.dual;
        GemmMatch copy = match; // the emitter reads the match; each twin its own
        Emitter(copy, twin, gm).run();
        ++made;
      }
      if (made == 0)
        m->setAttr("kiln.sm90",
                   StringAttr::get(&getContext(),
                                   "kernel '" + k.getSymName().str() + "': " +
                                       (match.dual ? "two products take lone tiles 128 or 256 wide of 64 or 128 rows (no "
                                                     "clusters, ping-pong, tall or decode twin), and the options select none"
                                                   : "the 64 x 256 ping-pong tile takes no residual (its loads would "
                                                     "spill beside the accumulators)")));
    }
  }
};

} // namespace

} // namespace kiln::hopper
