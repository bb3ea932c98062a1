// The sm_90a twin's stream-K fix-up: a tile whose k-steps were split between CTAs (see
// Sm90Tiles.h for the split and the workspace) is summed by the warpgroup that finishes its
// part last, in k order, so the same inputs give the same bits whichever CTA that is. No CTA
// waits for another: a CTA that is not scheduled yet (another kernel holds its SM) cannot
// stall one that is running.
#include "hopper/Emitter.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace kiln::hopper::detail {

std::pair<Value, Value> Emitter::streamKFixup(Value acc) {
  auto op = b_.create<scf::IfOp>(loc_, TypeRange{accType(), b_.getI1Type()}, partial_, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard g(b_);
  b_.setInsertionPointToStart(op.elseBlock());
  b_.create<scf::YieldOp>(loc_, ValueRange{acc, b_.create<arith::ConstantIntOp>(loc_, 1, 1)});
  b_.setInsertionPointToStart(op.thenBlock());

  MLIRContext* ctx = b_.getContext();
  auto global = LLVM::LLVMPointerType::get(ctx, 1);
  auto v4 = VectorType::get({4}, b_.getF32Type());
  const int64_t vecs = cfg_.bn / 8; // 16-byte steps per thread: the fragment's bn / 2 floats
  Value cw = sub(wg_, i32(1));
  Value lane = remu(tid_, i32(128));
  Value bid = b_.create<arith::IndexCastOp>(loc_, b_.getI32Type(), b_.create<gpu::BlockIdOp>(loc_, gpu::Dimension::x));
  // This warpgroup's part of slot s of CTA c, at this thread's first 16 bytes; step q of
  // the fragment lies q x 2 KiB further (the warpgroup's 128 threads side by side).
  auto part = [&](Value c, Value s) {
    Value slot = ext64(add(mul(c, i32(2)), s));
    Value off = add(add(i64(kStreamKCounterBytes), mul(slot, i64(streamKSlotBytes(cfg_.bn)))),
                    add(mul(ext64(cw), i64(streamKSlotBytes(cfg_.bn) / 2)), ext64(mul(lane, i32(16)))));
    return byteAt(ws_, off);
  };
  auto stepAt = [&](Value p, int64_t q) { return q ? byteAt(p, i64(q * 128 * 16)) : p; };
  auto syncWarpgroup = [&] { b_.create<NVVM::BarrierOp>(loc_, Type(), wg_, i32(128), NVVM::BarrierReductionAttr(), Value()); };

  // 1. This part's sums into slot 0 (the CTA's first item) or 1 (its last).
  Value mySlot = b_.create<arith::SelectOp>(loc_, eq(segStart_, skMyStart_), i32(0), i32(1));
  Value mine = part(bid, mySlot);
  for (int64_t q = 0; q < vecs; ++q) {
    SmallVector<Value, 4> x;
    for (int64_t e = 0; e < 4; ++e) x.push_back(b_.create<LLVM::ExtractValueOp>(loc_, acc, ArrayRef<int64_t>{4 * q + e}));
    b_.create<LLVM::StoreOp>(loc_, b_.create<vector::FromElementsOp>(loc_, v4, x), stepAt(mine, q), /*alignment=*/16);
  }
  syncWarpgroup();

  // 2. The tile's parts, in k order, belong to CTAs skOwner(tS) .. skOwner(tE - 1). The
  //    first of them holds its part in slot 1 when its steps began in an earlier tile.
  Value tS = mul(skTile_, kTiles_);
  Value cFirst = skOwner(tS), cLast = skOwner(sub(add(tS, kTiles_), i32(1)));
  Value parts = add(sub(cLast, cFirst), i32(1));
  Value counter = b_.create<LLVM::GEPOp>(loc_, global, b_.getI32Type(), ws_, ValueRange{add(mul(skTile_, i32(2)), cw)});
  Value flag = sharedPtr(add(i32(cfg_.flagOffset()), mul(cw, i32(4))));
  ifThen(eq(lane, i32(0)), [&] {
    // The fence before: the warpgroup's part sums (ordered before it by the barrier) are
    // visible device-wide before the count; after: every part counted before is visible to
    // the warpgroup after the next barrier. One thread's fences, not one per thread (an
    // ordered atomicrmw would do, but NVPTX emits it without its ordering).
    b_.create<NVVM::MembarOp>(loc_, NVVM::MemScopeKind::GPU);
    Value before = b_.create<LLVM::AtomicRMWOp>(loc_, LLVM::AtomicBinOp::add, counter, i32(1),
                                                LLVM::AtomicOrdering::monotonic);
    b_.create<NVVM::MembarOp>(loc_, NVVM::MemScopeKind::GPU);
    Value last = b_.create<arith::ExtUIOp>(loc_, b_.getI32Type(), eq(before, sub(parts, i32(1))));
    b_.create<LLVM::StoreOp>(loc_, last, flag);
  });
  syncWarpgroup();
  Value isLast = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::ne, b_.create<LLVM::LoadOp>(loc_, b_.getI32Type(), flag),
                                          i32(0));

  // 3. The last warpgroup sums every part (its own included, from the workspace) in k
  //    order, and leaves the counter at zero for the next launch.
  Value sum = ifValue(
      accType(), isLast,
      [&] {
        Value zero = b_.create<LLVM::ZeroOp>(loc_, accType());
        auto loop = b_.create<scf::ForOp>(loc_, i32(0), parts, i32(1), ValueRange{zero});
        {
          OpBuilder::InsertionGuard lg(b_);
          b_.setInsertionPointToStart(loop.getBody());
          Value i = loop.getInductionVar();
          Value c = add(cFirst, i);
          Value later = b_.create<arith::AndIOp>(loc_, eq(i, i32(0)), ult(skStart(c), tS));
          Value p = part(c, b_.create<arith::SelectOp>(loc_, later, i32(1), i32(0)));
          Value r = loop.getRegionIterArgs()[0];
          SmallVector<Value> loaded;
          // Volatile: another SM wrote these, and no stale L1 line may answer.
          for (int64_t q = 0; q < vecs; ++q)
            loaded.push_back(b_.create<LLVM::LoadOp>(loc_, v4, stepAt(p, q), /*alignment=*/16, /*isVolatile=*/true));
          for (int64_t q = 0; q < vecs; ++q)
            for (int64_t e = 0; e < 4; ++e) {
              Value x = b_.create<vector::ExtractOp>(loc_, loaded[size_t(q)], ArrayRef<int64_t>{e});
              Value a = b_.create<LLVM::ExtractValueOp>(loc_, r, ArrayRef<int64_t>{4 * q + e});
              r = b_.create<LLVM::InsertValueOp>(loc_, r, b_.create<arith::AddFOp>(loc_, a, x), ArrayRef<int64_t>{4 * q + e});
            }
          b_.create<scf::YieldOp>(loc_, r);
        }
        ifThen(eq(lane, i32(0)), [&] { b_.create<LLVM::StoreOp>(loc_, i32(0), counter); });
        return loop.getResult(0);
      },
      [&] { return acc; });
  b_.create<scf::YieldOp>(loc_, ValueRange{sum, isLast});
  return {op.getResult(0), op.getResult(1)};
}

} // namespace kiln::hopper::detail
