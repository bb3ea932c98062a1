// The sm_90a twin's epilogue: the tile kernel's own elementwise ops evaluated on each
// accumulator element where it lives, a chunk at a time, and C stored from registers (f32)
// or through swizzled staging boxes by TMA (16-bit). See WgmmaGemm.cpp for the whole kernel.
#include "hopper/Emitter.h"
#include "Transforms/ScalarMath.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/APFloat.h"

#include <cassert>

namespace kiln::hopper::detail {

namespace {

/// Rounds an f32 value to `t`'s precision and back (a no-op for f32): what storing an
/// intermediate tile of that type does in every other backend.
Value roundTo(OpBuilder& b, Location loc, Value v, Type t) {
  if (t.isF32()) return v;
  Value narrow = b.create<arith::TruncFOp>(loc, t, v);
  return b.create<arith::ExtFOp>(loc, b.getF32Type(), narrow);
}

std::tuple<void*, int64_t, int64_t> loadKey(Value load, const SmallVector<Axis, 2>& axes, const Site& site) {
  bool row = llvm::is_contained(axes, Axis::Row), col = llvm::is_contained(axes, Axis::Col);
  return {load.getAsOpaquePointer(), row ? site.h : -1, col ? site.c : -1};
}

} // namespace

std::pair<Value, SmallVector<Value, 2>>& Emitter::inputOf(Value v) {
  auto view = v.getDefiningOp<LoadOp>().getView().getDefiningOp<ViewOp>();
  return inputs_[cast<BlockArgument>(view.getTensor()).getArgNumber()];
}

Value Emitter::loadInput(Value v, const Site& site, int64_t count) {
  const auto& axes = m_.axes.lookup(v);
  auto& [ptr, strides] = inputOf(v);
  Type elt = cast<TileType>(v.getType()).getElementType();
  Value off = i64(0);
  for (size_t d = 0; d < axes.size(); ++d) off = add(off, mul(axes[d] == Axis::Row ? site.row : site.col, strides[d]));
  Value p = b_.create<LLVM::GEPOp>(loc_, ptr.getType(), elt, ptr, ValueRange{off});
  if (count == 1) return b_.create<LLVM::LoadOp>(loc_, elt, p);
  return b_.create<LLVM::LoadOp>(loc_, VectorType::get({count}, elt), p, unsigned(count * elt.getIntOrFloatBitWidth() / 8));
}

void Emitter::loadInputs(const Site& site, LoadCache& loaded) {
  for (Value v : epilogueLoads_) {
    auto key = loadKey(v, m_.axes.lookup(v), site);
    if (loaded.count(key)) continue;
    auto pre = preloaded_.find(key);
    Value x = pre != preloaded_.end() ? pre->second : loadInput(v, site);
    loaded[key] = x.getType().isF32() ? x : b_.create<arith::ExtFOp>(loc_, b_.getF32Type(), x);
  }
}

void Emitter::loadChunkInputs(ArrayRef<Site> sites, LoadCache& loaded, bool pairs) {
  for (size_t p = 0; p < sites.size(); ++p) {
    const Site& s = sites[p];
    const bool pairHere = pairs && p + 1 < sites.size() && s.c % 2 == 0 && sites[p + 1].h == s.h &&
                          sites[p + 1].c == s.c + 1;
    for (Value v : epilogueLoads_) {
      const auto& axes = m_.axes.lookup(v);
      if (!pairHere || !llvm::is_contained(axes, Axis::Col)) continue;
      auto k0 = loadKey(v, axes, s), k1 = loadKey(v, axes, sites[p + 1]);
      if (loaded.count(k0) || preloaded_.count(k0) || preloaded_.count(k1)) continue;
      Value two = loadInput(v, s, 2); // both columns in one load, at the first's address
      for (int64_t e = 0; e < 2; ++e) {
        Value x = b_.create<LLVM::ExtractElementOp>(loc_, two, i32(e));
        loaded[e ? k1 : k0] = x.getType().isF32() ? x : b_.create<arith::ExtFOp>(loc_, b_.getF32Type(), x);
      }
    }
    loadInputs(s, loaded);
  }
}

Value Emitter::pairsAligned() {
  Value ok = b_.create<arith::ConstantIntOp>(loc_, 1, 1);
  for (Value v : epilogueLoads_) {
    const auto& axes = m_.axes.lookup(v);
    if (!llvm::is_contained(axes, Axis::Col)) continue;
    // Inputs along columns only, on tiles whose every column preloadColumnInputs() reads: never
    // read in the epilogue, so never in pairs.
    if (!llvm::is_contained(axes, Axis::Row) && cfg_.bn <= 128) continue;
    auto& [ptr, strides] = inputOf(v);
    const int64_t pairBytes = 2 * cast<TileType>(v.getType()).getElementType().getIntOrFloatBitWidth() / 8;
    Value addr = b_.create<LLVM::PtrToIntOp>(loc_, b_.getI64Type(), ptr);
    auto isZero = [&](Value x) { return b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::eq, x, i64(0)).getResult(); };
    ok = b_.create<arith::AndIOp>(loc_, ok, isZero(b_.create<arith::AndIOp>(loc_, addr, i64(pairBytes - 1))));
    for (size_t d = 0; d < axes.size(); ++d) {
      Value good = axes[d] == Axis::Col
                       ? b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::eq, strides[d], i64(1)).getResult()
                       : isZero(b_.create<arith::AndIOp>(loc_, strides[d], i64(1)));
      ok = b_.create<arith::AndIOp>(loc_, ok, good);
    }
  }
  return ok;
}

void Emitter::preloadColumnInputs() {
  preloaded_.clear();
  // This thread's columns, as (the site's c, the offset from col0) in the epilogue's keys.
  Value col0;
  SmallVector<std::pair<int64_t, int64_t>> columns;
  if (cfg_.swapAB) {
    // Its fragment's rows are C's columns: two per thread, 8 apart (epilogueSwapped's sites).
    // Loaded there, after the main loop, each waited behind the weight's reads that fill the
    // DRAM queues of a decode GEMM.
    col0 = swappedCol0();
    columns = {{0, 0}, {1, 8}};
  } else {
    Value l = remu(remu(tid_, i32(128)), i32(32));
    col0 = add(bN0_, mul(remu(l, i32(4)), i32(2))); // as epilogue()'s
    // How many of this thread's column groups (2 columns each, 8j + e): all of a 128-wide
    // tile's; half of a 256-wide one's, and none beside inputs that vary along rows (a
    // residual): more would spill beside its 128 accumulators.
    // (Accumulators of 128 registers: a 256-wide product, two 128-wide ones, or the tall
    // tile's two row parts.)
    const int64_t groups = partElements() * cfg_.rowParts() <= 64 ? cfg_.outN() / 8
                           : readsRowInputs(m_) ? 0
                                                : std::min(kPreloadGroups, cfg_.outN() / 8);
    for (int64_t j = 0; j < groups; ++j)
      for (int64_t e = 0; e < 2; ++e) columns.push_back({8 * j + e, 8 * j + e});
  }
  Value lastCol = sub(ext64(N_), i64(1));
  for (Value v : epilogueLoads_) {
    const auto& axes = m_.axes.lookup(v);
    if (llvm::is_contained(axes, Axis::Row)) continue;
    // A scalar input: one load, whatever the columns. (Columns clamped to C's last: edge
    // tiles read in bounds.)
    const bool byColumn = llvm::is_contained(axes, Axis::Col);
    // (A named array: an ArrayRef of a braced list would outlive the list's storage.)
    static const std::pair<int64_t, int64_t> firstColumn[] = {{0, 0}};
    for (auto [c, offset] : byColumn ? ArrayRef(columns) : ArrayRef(firstColumn)) {
      Site s{0, i64(0), b_.create<arith::MinUIOp>(loc_, ext64(add(col0, i32(offset))), lastCol), 0, c};
      preloaded_[loadKey(v, axes, s)] = loadInput(v, s);
    }
  }
}

Value Emitter::evalElement(Value v, Value acc, const Site& site, LoadCache& loaded, DenseMap<Value, Value>& memo) {
  if (auto it = memo.find(v); it != memo.end()) return it->second;
  Value out;
  Type elt = cast<TileType>(v.getType()).getElementType();
  if (v == m_.loop.getResult(0)) {
    out = b_.create<LLVM::ExtractValueOp>(loc_, acc, ArrayRef<int64_t>{site.accIndex});
  } else if (m_.dual && v == m_.loop.getResult(1)) { // the same column of the second product: group j + outN / 8
    out = b_.create<LLVM::ExtractValueOp>(loc_, acc, ArrayRef<int64_t>{site.accIndex + cfg_.outN() / 2});
  } else if (auto f = v.getDefiningOp<FullOp>()) {
    llvm::APFloat x(f.getValue().convertToDouble());
    bool lost;
    x.convert(elt.isF32() ? llvm::APFloat::IEEEsingle() : cast<FloatType>(elt).getFloatSemantics(),
              llvm::APFloat::rmNearestTiesToEven, &lost);
    x.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven, &lost);
    out = b_.create<arith::ConstantOp>(loc_, b_.getF32FloatAttr(x.convertToFloat()));
  } else if (auto bc = v.getDefiningOp<BroadcastOp>()) {
    out = evalElement(bc.getInput(), acc, site, loaded, memo);
  } else if (v.getDefiningOp<LoadOp>()) {
    out = loaded.at(loadKey(v, m_.axes.lookup(v), site));
  } else {
    Operation* op = v.getDefiningOp();
    SmallVector<Value> x;
    for (Value in : op->getOperands()) x.push_back(evalElement(in, acc, site, loaded, memo));
    out = roundTo(b_, loc_, emitScalar(b_, loc_, op, x), elt);
  }
  memo[v] = out;
  return out;
}

void Emitter::epilogue(Value acc) {
  if (cfg_.swapAB) return epilogueSwapped(acc);
  // Accumulator fragment of m64nNk16 (per warpgroup): thread t = tid % 128, warp w = t / 32,
  // lane l = t % 32; struct element 4j + 2h + e holds row 16w + l/4 + 8h, column 8j + 2(l%4) + e.
  // (The tall tile's part p: element p x N / 2 + 4j + 2h + e, its row 64p further.)
  Value t = remu(tid_, i32(128));
  Value w = divu(t, i32(32));
  Value l = remu(t, i32(32));
  Value row0 = add(add(add(aM0_, mul(rowBlock(), i32(64))), mul(w, i32(16))), divu(l, i32(4)));
  Value col0 = add(bN0_, mul(remu(l, i32(4)), i32(2)));
  // Tiles inside C (all but the last row and column of tiles) read their inputs without
  // clamps and store without masks; the edge tiles take the careful path.
  Value inside = b_.create<arith::AndIOp>(loc_, ule(add(m0_, i32(cfg_.bm)), M_), ule(add(n0_, i32(cfg_.outN())), N_));
  // The careful path also serves inputs that cannot be read two columns at a time (a
  // misaligned residual): the fast one reads them so.
  inside = b_.create<arith::AndIOp>(loc_, inside, pairsAligned());
  // A tile moved inside A or B (the last row or column of tiles: setTile) is never inside:
  // the masked path stores only its rows from m0_ and columns from n0_ on.
  auto body = [&](bool masked) {
    if (tmC_) epilogueTma(acc, row0, col0, masked);
    else epilogueStores(acc, row0, col0, masked);
  };
  auto both = [&] { ifThenElse(inside, [&] { body(false); }, [&] { body(true); }); };
  // A cluster's tile past C's last column (row, along M) stores nothing.
  if (cfg_.cluster > 1) ifThen(cfg_.clusterAlongM ? ult(m0_, M_) : ult(n0_, N_), both);
  else both();
}

SmallVector<Site> Emitter::chunkSites(int64_t j0, int64_t j1, Value row0, Value col0, bool masked) {
  Value lastRow = sub(ext64(M_), i64(1)), lastCol = sub(ext64(N_), i64(1));
  auto clamp = [&](Value v, Value last) { return masked ? b_.create<arith::MinUIOp>(loc_, v, last).getResult() : v; };
  SmallVector<Site> sites;
  for (int64_t j = j0; j < j1; ++j)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t e = 0; e < 2; ++e)
        sites.push_back({4 * j + 2 * h + e, clamp(ext64(add(row0, i32(8 * h))), lastRow),
                         clamp(ext64(add(col0, i32(8 * j + e))), lastCol), h, 8 * j + e});
  for (Site& s : sites) s.accIndex += accBase_;
  return sites;
}

// Both epilogues evaluate kChunk column groups (16 elements per thread) at a time: first every load of the chunk, then its math
// and stores. Loads issued together overlap their latency; a load after a store could not
// move above it (C may alias an input as far as the compiler knows). Every element is
// still read (from an epilogue input) before the same thread writes it, so C may be the
// residual input itself.

Value Emitter::moved() { return b_.create<arith::OrIOp>(loc_, ult(aM0_, m0_), ult(bN0_, n0_)); }

void Emitter::storeC(Value v, Value row, Value col, Value M, Value N, bool masked, Value rowMin, Value colMin) {
  auto store = [&] {
    auto global = LLVM::LLVMPointerType::get(b_.getContext(), 1);
    Type cElt = m_.kernel.getArgType(m_.c).getElementType();
    Value ptr = b_.create<LLVM::GEPOp>(loc_, global, cElt, cPtr_, ValueRange{add(mul(row, cStride_), col)});
    b_.create<LLVM::StoreOp>(loc_, v, ptr);
  };
  Value inside = b_.create<arith::AndIOp>(loc_, ult(row, M), ult(col, N));
  if (rowMin) inside = b_.create<arith::AndIOp>(loc_, inside, ule(rowMin, row));
  if (colMin) inside = b_.create<arith::AndIOp>(loc_, inside, ule(colMin, col));
  if (masked) ifThen(inside, store);
  else store();
}

void Emitter::epilogueStores(Value acc, Value row0Of0, Value col0, bool masked) {
  Value M = ext64(M_), N = ext64(N_);
  Value rowMin = masked ? ext64(m0_) : Value(), colMin = masked ? ext64(n0_) : Value();
  for (int64_t p = 0; p < cfg_.rowParts(); ++p) {
    Value row0 = enterPart(p, row0Of0);
    for (int64_t j0 = 0; j0 < cfg_.outN() / 8; j0 += kChunk) {
      SmallVector<Site> sites = chunkSites(j0, j0 + kChunk, row0, col0, masked);
      LoadCache loaded;
      loadChunkInputs(sites, loaded, /*pairs=*/!masked);
      for (const Site& s : sites) {
        DenseMap<Value, Value> memo;
        Value v = evalElement(m_.store.getValue(), acc, s, loaded, memo);
        Value row = ext64(add(row0, i32(8 * s.h)));
        Value col = ext64(add(col0, i32(s.c)));
        storeC(v, row, col, M, N, masked, rowMin, colMin);
      }
    }
  }
  accBase_ = 0;
}

void Emitter::epilogueTma(Value acc, Value row0Of0, Value col0, bool masked) {
  // Each consumer warpgroup stores its 64 rows as 64 x 64 boxes, alternating between its
  // two staging buffers.
  Value cw = sub(wg_, i32(1));
  Value leader = eq(remu(tid_, i32(128)), i32(0));
  Value myStaging = add(i32(cfg_.stagingOffset()), mul(cw, i32(2 * kStagingBoxBytes)));
  // Named barriers 1 and 2, one per consumer warpgroup (0 is the CTA's): the two
  // warpgroups store their boxes independently.
  auto syncWarpgroup = [&] { b_.create<NVVM::BarrierOp>(loc_, Type(), wg_, i32(128), NVVM::BarrierReductionAttr(), Value()); };

  // Boxes wholly right of C are skipped, so within a tile the stores are boxes 0, 1, ...
  // in order and the one before last used this buffer: "at most one store still reading"
  // frees it. The first box waits for none (the last tile's stores may have skipped). A
  // tile moved inside A or B stores no box by TMA (after its first box, none is pending),
  // and skips its boxes after the first that lie wholly left of n0_. (Its first is staged
  // and copied, masked, even there: skipping it too spilled the 128 x 256 twin's registers.)
  // The tall tile's two row parts take turns box by box, column by column (i = 2q + p): boxes
  // skipped right of C are still the last ones.
  Value isMoved = masked ? moved() : Value();
  const int64_t parts = cfg_.rowParts();
  Value boxRowOf0 = add(aM0_, mul(rowBlock(), i32(64)));
  for (int64_t i = 0; i < cfg_.outN() / 64 * parts; ++i) {
    const int64_t q = i / parts, p = i % parts;
    Value row0 = enterPart(p, row0Of0);
    Value boxRow = p ? add(boxRowOf0, i32(64 * p)) : boxRowOf0, boxCol = add(bN0_, i32(64 * q));
    Value buf = add(myStaging, i32((i % 2) * kStagingBoxBytes));
    auto box = [&] {
      ifThen(leader, [&] {
        b_.create<NVVM::CpAsyncBulkWaitGroupOp>(loc_, b_.getI32IntegerAttr(i == 0 ? 0 : 1), b_.getUnitAttr());
      });
      syncWarpgroup();
      for (int64_t j0 = 8 * q; j0 < 8 * q + 8; j0 += kChunk) stageChunk(acc, j0, row0, col0, masked, buf, 8 * q);
      // The generic-proxy writes become visible to TMA (the async proxy), then one thread
      // stores the box; TMA writes only what lies inside C.
      b_.create<NVVM::FenceProxyOp>(loc_, NVVM::ProxyKind::async_shared,
                                    NVVM::SharedSpaceAttr::get(b_.getContext(), NVVM::SharedSpace::shared_cta));
      syncWarpgroup();
      auto byTma = [&] {
        ifThen(b_.create<arith::AndIOp>(loc_, leader, ult(boxRow, M_)), [&] {
          b_.create<NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp>(loc_, tmC_, sharedPtr(buf), ValueRange{boxCol, boxRow},
                                                                Value(), NVVM::TMAStoreMode::TILE, Value());
          b_.create<NVVM::CpAsyncBulkCommitGroupOp>(loc_);
        });
      };
      // A tile moved inside A or B: TMA would write the box's rows before m0_ and columns
      // before n0_ too (another tile's), so the warpgroup copies the rest itself.
      if (masked) ifThenElse(isMoved, [&] { copyBox(buf, boxRow, boxCol); }, byTma);
      else byTma();
    };
    // (The same for the whole warpgroup.)
    if (masked && i > 0) ifThen(b_.create<arith::AndIOp>(loc_, ult(boxCol, N_), ult(n0_, add(boxCol, i32(64)))), box);
    else box();
  }
  accBase_ = 0;
}

void Emitter::copyBox(Value buf, Value boxRow, Value boxCol) {
  // 64 rows of 8 16-byte chunks (C's rows are whole 16-byte units: Sm90Launch.cpp), four per
  // thread; chunk c of row r lies at chunk c ^ (r % period) of the swizzled row (cShared_, as
  // stageChunk wrote it).
  const int64_t rowBytes = cShared_.getSwizzle(), chunks = cShared_.period();
  auto shared = LLVM::LLVMPointerType::get(b_.getContext(), 3);
  auto global = LLVM::LLVMPointerType::get(b_.getContext(), 1);
  auto v4 = VectorType::get({4}, b_.getI32Type());
  Type cElt = m_.kernel.getArgType(m_.c).getElementType();
  Value t = remu(tid_, i32(128));
  for (int64_t k = 0; k < 64 * chunks / 128; ++k) {
    Value i = add(t, i32(128 * k));
    Value r = divu(i, i32(chunks)), c = remu(i, i32(chunks));
    Value row = add(boxRow, r), col = add(boxCol, mul(c, i32(8)));
    Value keep = b_.create<arith::AndIOp>(loc_, b_.create<arith::AndIOp>(loc_, ule(m0_, row), ult(row, M_)),
                                          b_.create<arith::AndIOp>(loc_, ule(n0_, col), ult(col, N_)));
    ifThen(keep, [&] {
      Value off = add(add(buf, mul(r, i32(rowBytes))), mul(b_.create<arith::XOrIOp>(loc_, c, remu(r, i32(chunks))), i32(16)));
      Value v = b_.create<LLVM::LoadOp>(loc_, v4, b_.create<LLVM::GEPOp>(loc_, shared, b_.getI8Type(), smem_, ValueRange{off}),
                                        /*alignment=*/16);
      Value at = add(mul(ext64(row), cStride_), ext64(col));
      b_.create<LLVM::StoreOp>(loc_, v, b_.create<LLVM::GEPOp>(loc_, global, cElt, cPtr_, ValueRange{at}), /*alignment=*/16);
    });
  }
}

void Emitter::stageChunk(Value acc, int64_t j0, Value row0, Value col0, bool masked, Value buf, int64_t jBox) {
  // A box is laid out as cShared_ (#tile.nvmma_shared<swizzle = 128, major = "mn">) says:
  // row r at r x 128 bytes, its 16-byte chunk c at chunk c ^ (r % 8). A thread's rows in the
  // #tile.wgmma fragment are 16w + l/4 + 8h, so r % 8 = l/4 (for an 8-row pattern), and a
  // warp's 4-byte stores for one (j, h) hit 32 different banks.
  assert(cShared_.period() == 8 && "the fragment's rows mod the swizzle period are lane / 4 only for 8 rows");
  const int64_t rowBytes = cShared_.getSwizzle();
  Value t = remu(tid_, i32(128));
  Value l = remu(t, i32(32));
  Value rowByte = mul(add(mul(divu(t, i32(32)), i32(16)), divu(l, i32(4))), i32(rowBytes)); // h = 0
  Value swz = divu(l, i32(4));
  Value laneByte = mul(remu(l, i32(4)), i32(4));
  Type cElt = m_.kernel.getArgType(m_.c).getElementType();
  auto shared = LLVM::LLVMPointerType::get(b_.getContext(), 3);
  SmallVector<Site> sites = chunkSites(j0, j0 + kChunk, row0, col0, masked);
  LoadCache loaded;
  loadChunkInputs(sites, loaded, /*pairs=*/!masked);
  for (size_t p = 0; p < sites.size(); p += 2) {
    Value v[2];
    for (int e = 0; e < 2; ++e) {
      DenseMap<Value, Value> memo;
      v[e] = evalElement(m_.store.getValue(), acc, sites[p + e], loaded, memo);
    }
    auto v2 = VectorType::get({2}, b_.getF32Type());
    Value pair = b_.create<vector::FromElementsOp>(loc_, v2, ValueRange{v[0], v[1]});
    Value bits = b_.create<LLVM::BitcastOp>(loc_, b_.getI32Type(),
                                            b_.create<arith::TruncFOp>(loc_, VectorType::get({2}, cElt), pair));
    int64_t jj = sites[p].c / 8 - jBox, h = sites[p].h;
    Value chunk = b_.create<arith::XOrIOp>(loc_, swz, i32(jj));
    Value off = add(add(buf, add(rowByte, i32(8 * h * rowBytes))), add(mul(chunk, i32(16)), laneByte));
    b_.create<LLVM::StoreOp>(loc_, bits, b_.create<LLVM::GEPOp>(loc_, shared, b_.getI8Type(), smem_, ValueRange{off}),
                             /*alignment=*/4);
  }
}

Value Emitter::swappedCol0() {
  Value t = remu(tid_, i32(128));
  Value n0 = cfg_.wideSwap() ? add(n0_, mul(colBlock(), i32(64))) : n0_; // this consumer's 64 columns
  return add(add(n0, mul(divu(t, i32(32)), i32(16))), divu(remu(t, i32(32)), i32(4)));
}

void Emitter::epilogueSwapped(Value acc) {
  // The fragment is C^T's (m64nBMk16): struct element 4j + 2h + e holds C^T's row (C's
  // column) 16w + l/4 + 8h and column (C's row, from aM0_) 8j + 2(l%4) + e. A site's h names the C row
  // it is in (2j + e), its c the C column (h): the keys loadInputs shares loads by.
  Value l = remu(remu(tid_, i32(128)), i32(32));
  Value col0 = swappedCol0();
  Value row0 = add(aM0_, mul(remu(l, i32(4)), i32(2)));
  Value M = ext64(M_), N = ext64(N_);
  Value lastRow = sub(M, i64(1)), lastCol = sub(N, i64(1));
  Type cElt = m_.kernel.getArgType(m_.c).getElementType();
  SmallVector<Site> sites;
  for (int64_t j = 0; j < cfg_.bm / 8; ++j)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t e = 0; e < 2; ++e) {
        Value row = ext64(add(row0, i32(8 * j + e))), col = ext64(add(col0, i32(8 * h)));
        sites.push_back({4 * j + 2 * h + e, b_.create<arith::MinUIOp>(loc_, row, lastRow),
                         b_.create<arith::MinUIOp>(loc_, col, lastCol), 2 * j + e, h});
      }
  LoadCache loaded;
  for (const Site& s : sites) loadInputs(s, loaded);
  for (const Site& s : sites) {
    DenseMap<Value, Value> memo;
    Value v = evalElement(m_.store.getValue(), acc, s, loaded, memo);
    if (!cElt.isF32()) v = b_.create<arith::TruncFOp>(loc_, cElt, v);
    // (The site's row and column are clamped for the loads; the store takes them as they are.)
    Value row = ext64(add(row0, i32(8 * (s.h / 2) + s.h % 2)));
    Value col = ext64(add(col0, i32(8 * s.c)));
    // A tile moved up to stay inside A (aM0_ < m0_) stores only its own rows.
    storeC(v, row, col, M, N, /*masked=*/true, /*rowMin=*/ext64(m0_));
  }
}

} // namespace kiln::hopper::detail
