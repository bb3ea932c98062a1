// The sm_90a twin's split-K fix-ups. Through the workspace: a tile cut into chunks along K
// (see Sm90Tiles.h for the cut and the workspace) is summed by the consumer warpgroup that
// finishes its chunk last, in chunk order, so the same inputs give the same bits whichever
// CTA that is. No CTA waits for another: a CTA that is not scheduled yet (another kernel
// holds its SM) cannot stall one that is running. In K-clusters (the decode twin): the
// cluster's CTAs run together by construction, and rank 0 waits for its peers' sums.
#include "hopper/Emitter.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <algorithm>
#include <cassert>

namespace kiln::hopper::detail {

scf::IfOp Emitter::fixupIf(Value cond, Value acc) {
  auto op = b_.create<scf::IfOp>(loc_, TypeRange{accType(), b_.getI1Type()}, cond, /*withElseRegion=*/true);
  b_.setInsertionPointToStart(op.elseBlock());
  b_.create<scf::YieldOp>(loc_, ValueRange{acc, b_.create<arith::ConstantIntOp>(loc_, 1, 1)});
  b_.setInsertionPointToStart(op.thenBlock());
  return op;
}

Value Emitter::addParts(Value r, ArrayRef<Value> parts, int64_t q0) {
  for (size_t i = 0; i < parts.size(); ++i)
    for (int64_t e = 0; e < 4; ++e) {
      const int64_t at = 4 * (q0 + int64_t(i)) + e;
      Value x = b_.create<vector::ExtractOp>(loc_, parts[i], ArrayRef<int64_t>{e});
      Value a = b_.create<LLVM::ExtractValueOp>(loc_, r, ArrayRef<int64_t>{at});
      r = b_.create<LLVM::InsertValueOp>(loc_, r, b_.create<arith::AddFOp>(loc_, a, x), ArrayRef<int64_t>{at});
    }
  return r;
}

std::pair<Value, Value> Emitter::splitKFixup(Value acc) {
  // The host sizes the workspace by the plan's tileN (C's tile); the slots here hold the
  // whole accumulator (bn columns): only one product fits that (declareParams).
  assert(!cfg_.dual && "split-K workspace slots hold one product's accumulator");
  OpBuilder::InsertionGuard g(b_);
  scf::IfOp op = fixupIf(partial_, acc);

  MLIRContext* ctx = b_.getContext();
  auto global = LLVM::LLVMPointerType::get(ctx, 1);
  auto v4 = VectorType::get({4}, b_.getF32Type());
  const int64_t vecs = cfg_.mmaN() / 8; // 16-byte steps per thread: the fragment's mmaN / 2 floats
  Value cw = sub(wg_, i32(1));
  Value lane = remu(tid_, i32(128));
  // This warpgroup's part of unit u's slot, at this thread's first 16 bytes; step q of the
  // fragment lies q x 2 KiB further (the warpgroup's 128 threads side by side).
  auto part = [&](Value u) {
    Value off = add(add(i64(kSplitKCounterBytes), mul(ext64(u), i64(splitKSlotBytes(cfg_.bm, cfg_.bn)))),
                    add(mul(ext64(cw), i64(splitKSlotBytes(cfg_.bm, cfg_.bn) / 2)), ext64(mul(lane, i32(16)))));
    return byteAt(ws_, off);
  };
  auto stepAt = [&](Value p, int64_t q) { return q ? byteAt(p, i64(q * 128 * 16)) : p; };
  auto syncWarpgroup = [&] { b_.create<NVVM::BarrierOp>(loc_, Type(), wg_, i32(128), NVVM::BarrierReductionAttr(), Value()); };

  // A warp whose 16 rows of the tile all lie past C's last row has nothing to sum: it
  // neither writes nor reads its part of the slots (a decode GEMM's tile of M = 16 rows
  // moves a quarter of the bytes). Warp-uniform. (The decode twin never comes here: it
  // splits in clusters, clusterFixup.)
  Value warpRow0 = add(add(aM0_, mul(rowBlock(), i32(64))), mul(divu(lane, i32(32)), i32(16)));
  Value live = ult(warpRow0, M_);

  // 1. This chunk's sums into its unit's slot.
  Value mine = part(skUnit_);
  ifThen(live, [&] {
    for (int64_t q = 0; q < vecs; ++q) {
      SmallVector<Value, 4> x;
      for (int64_t e = 0; e < 4; ++e)
        x.push_back(b_.create<LLVM::ExtractValueOp>(loc_, acc, ArrayRef<int64_t>{4 * q + e}));
      b_.create<LLVM::StoreOp>(loc_, b_.create<vector::FromElementsOp>(loc_, v4, x), stepAt(mine, q), /*alignment=*/16);
    }
  });
  syncWarpgroup();

  // 2. One thread counts the warpgroup in. The fence before: the warpgroup's sums (ordered
  //    before it by the barrier) are visible device-wide before the count; after: every
  //    chunk counted before is visible to the warpgroup after the next barrier. One thread's
  //    fences, not one per thread (an ordered atomicrmw would do, but NVPTX emits it
  //    without its ordering).
  Value counter = b_.create<LLVM::GEPOp>(loc_, global, b_.getI32Type(), ws_, ValueRange{add(mul(skTile_, i32(kSplitKCountersPerTile)), cw)});
  Value flag = sharedPtr(add(i32(cfg_.flagOffset()), mul(cw, i32(4))));
  ifThen(eq(lane, i32(0)), [&] {
    b_.create<NVVM::MembarOp>(loc_, NVVM::MemScopeKind::GPU);
    Value before = b_.create<LLVM::AtomicRMWOp>(loc_, LLVM::AtomicBinOp::add, counter, i32(1),
                                                LLVM::AtomicOrdering::monotonic);
    b_.create<NVVM::MembarOp>(loc_, NVVM::MemScopeKind::GPU);
    Value last = b_.create<arith::ExtUIOp>(loc_, b_.getI32Type(), eq(before, sub(kSplits_, i32(1))));
    b_.create<LLVM::StoreOp>(loc_, last, flag);
  });
  syncWarpgroup();
  Value isLast = ne(b_.create<LLVM::LoadOp>(loc_, b_.getI32Type(), flag), i32(0));

  // 3. The last warpgroup sums the tile's chunks j = 0 .. s - 1 (units j skTiles + t, its
  //    own included, from the workspace) in that order, and leaves the counter at zero
  //    for the next launch. Its warps past C's rows keep their own sums: none is stored.
  ifThen(b_.create<arith::AndIOp>(loc_, isLast, eq(lane, i32(0))), [&] { b_.create<LLVM::StoreOp>(loc_, i32(0), counter); });
  Value sum = ifValue(
      accType(), b_.create<arith::AndIOp>(loc_, isLast, live),
      [&] {
        Value zero = b_.create<LLVM::ZeroOp>(loc_, accType());
        auto loop = b_.create<scf::ForOp>(loc_, i32(0), kSplits_, i32(1), ValueRange{zero});
        {
          OpBuilder::InsertionGuard lg(b_);
          b_.setInsertionPointToStart(loop.getBody());
          Value p = part(add(mul(loop.getInductionVar(), skTiles_), skTile_));
          Value r = loop.getRegionIterArgs()[0];
          // 16 loads in flight at a time: all of a 128 x 256 tile's 32 beside its 128
          // accumulators would not fit in 240 registers. Volatile: another SM wrote these,
          // and no stale L1 line may answer.
          constexpr int64_t kInFlight = 16;
          for (int64_t q0 = 0; q0 < vecs; q0 += kInFlight) {
            SmallVector<Value> loaded;
            for (int64_t q = q0; q < std::min(vecs, q0 + kInFlight); ++q)
              loaded.push_back(b_.create<LLVM::LoadOp>(loc_, v4, stepAt(p, q), /*alignment=*/16, /*isVolatile=*/true));
            r = addParts(r, loaded, q0);
          }
          b_.create<scf::YieldOp>(loc_, r);
        }
        return loop.getResult(0);
      },
      [&] { return acc; });
  b_.create<scf::YieldOp>(loc_, ValueRange{sum, isLast});
  return {op.getResult(0), op.getResult(1)};
}

void Emitter::waitFromCluster(Value bar, Value parity) {
  // NVVM's try_wait acquires at CTA scope only. The braces scope the label: the asm is
  // emitted once per call site.
  Value addr = b_.create<LLVM::PtrToIntOp>(loc_, b_.getI32Type(), bar);
  b_.create<LLVM::InlineAsmOp>(
      loc_, TypeRange{}, ValueRange{addr, parity},
      "{\n.reg .pred p;\nkiln_wait:\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [$0], $1;\n"
      "@!p bra kiln_wait;\n}",
      "r,r,~{memory}", /*has_side_effects=*/true, /*is_align_stack=*/false, LLVM::TailCallKind::None,
      LLVM::AsmDialectAttr::get(b_.getContext(), LLVM::AsmDialect::AD_ATT), ArrayAttr());
}

std::pair<Value, Value> Emitter::clusterFixup(Value acc) {
  Type i1 = b_.getI1Type();
  OpBuilder::InsertionGuard g(b_);
  scf::IfOp op = fixupIf(ult(i32(1), kSize_), acc);

  MLIRContext* ctx = b_.getContext();
  auto clusterPtr = LLVM::LLVMPointerType::get(ctx, 7);
  auto v4 = VectorType::get({4}, b_.getF32Type());
  const int64_t vecs = cfg_.mmaN() / 8; // 16-byte steps per thread: the fragment's mmaN / 2 floats
  Value lane = remu(tid_, i32(128));
  // Peer p's slot (p = rank - 1) at this thread's first 16 bytes; step q lies q x 2 KiB
  // further (the warpgroup's 128 threads side by side), as in the workspace's slots.
  auto slot = [&](Value p) {
    return add(i32(cfg_.stagingOffset()), add(mul(p, i32(peerSumSlotBytes(cfg_.bm))), mul(lane, i32(16))));
  };
  Value warpLead = eq(remu(tid_, i32(32)), i32(0));
  auto syncWarp = [&] { b_.create<NVVM::SyncWarpOp>(loc_, i32(-1)); };
  Value parity = [&](Value n) { return b_.create<arith::AndIOp>(loc_, n, i32(1)).getResult(); }(itemIndex_);

  auto lead = b_.create<scf::IfOp>(loc_, TypeRange{accType(), i1}, eq(kRank_, i32(0)), /*withElseRegion=*/true);
  {
    // Rank 0: wait for every peer's sums of this item, add them in rank order, free the slots.
    OpBuilder::InsertionGuard lg(b_);
    b_.setInsertionPointToStart(lead.thenBlock());
    waitFromCluster(sumsBarrier(), parity);
    auto loop = b_.create<scf::ForOp>(loc_, i32(0), sub(kSize_, i32(1)), i32(1), ValueRange{acc});
    {
      OpBuilder::InsertionGuard fg(b_);
      b_.setInsertionPointToStart(loop.getBody());
      Value at = slot(loop.getInductionVar());
      Value r = loop.getRegionIterArgs()[0];
      SmallVector<Value> loaded;
      for (int64_t q = 0; q < vecs; ++q)
        loaded.push_back(b_.create<LLVM::LoadOp>(loc_, v4, sharedPtr(add(at, i32(q * 128 * 16))), /*alignment=*/16));
      b_.create<scf::YieldOp>(loc_, addParts(r, loaded, 0));
    }
    // The warp's reads are done before its lane 0 frees the slots; only where another item
    // follows (a peer waits for each free it is sent before it can finish: none lands in
    // a CTA that has left).
    syncWarp();
    ifThen(b_.create<arith::AndIOp>(loc_, warpLead, hasNext_), [&] {
      auto peers = b_.create<scf::ForOp>(loc_, i32(1), kSize_, i32(1));
      OpBuilder::InsertionGuard pg(b_);
      b_.setInsertionPoint(peers.getBody()->getTerminator());
      Value there = b_.create<NVVM::MapaOp>(loc_, clusterPtr, freeBarrier(), peers.getInductionVar());
      b_.create<NVVM::MBarrierArriveOp>(loc_, Type(), there, Value(), NVVM::MemScopeKind::CLUSTER);
    });
    b_.create<scf::YieldOp>(loc_, ValueRange{loop.getResult(0), b_.create<arith::ConstantIntOp>(loc_, 1, 1)});

    // A peer: once rank 0 has read its previous item's sums, this item's into its slot of
    // rank 0's shared memory; each warp's lane 0 then arrives (release: the warp's stores
    // before it) on rank 0's barrier.
    b_.setInsertionPointToStart(lead.elseBlock());
    ifThen(ult(i32(0), itemIndex_),
           [&] { waitFromCluster(freeBarrier(), b_.create<arith::AndIOp>(loc_, sub(itemIndex_, i32(1)), i32(1))); });
    Value mine = b_.create<NVVM::MapaOp>(loc_, clusterPtr, sharedPtr(slot(sub(kRank_, i32(1)))), i32(0));
    for (int64_t q = 0; q < vecs; ++q) {
      SmallVector<Value, 4> x;
      for (int64_t e = 0; e < 4; ++e)
        x.push_back(b_.create<LLVM::ExtractValueOp>(loc_, acc, ArrayRef<int64_t>{4 * q + e}));
      Value to = q ? b_.create<LLVM::GEPOp>(loc_, clusterPtr, b_.getI8Type(), mine, ValueRange{i32(q * 128 * 16)}).getResult()
                   : mine;
      b_.create<LLVM::StoreOp>(loc_, b_.create<vector::FromElementsOp>(loc_, v4, x), to, /*alignment=*/16);
    }
    syncWarp();
    ifThen(warpLead, [&] {
      Value there = b_.create<NVVM::MapaOp>(loc_, clusterPtr, sumsBarrier(), i32(0));
      b_.create<NVVM::MBarrierArriveOp>(loc_, Type(), there, Value(), NVVM::MemScopeKind::CLUSTER);
    });
    b_.create<scf::YieldOp>(loc_, ValueRange{acc, b_.create<arith::ConstantIntOp>(loc_, 0, 1)});
  }
  b_.create<scf::YieldOp>(loc_, lead.getResults());
  return {op.getResult(0), op.getResult(1)};
}

} // namespace kiln::hopper::detail
