// The portable CUDA lowering: layouts, and tile.dot on the tensor cores (mma.sync, ldmatrix) or as SIMT code. (portable/Lowering.h)
#include "portable/Lowering.h"

namespace kiln::portable {

Elems GpuKernelLowering::as(const Dist& d, TileType t, const Layout& l) {
  if (d.uniform) return Elems(perThread(t.getShape(), l), d.v[0]);
  if (d.layout == l) return d.v;
  Value buf = stage(d, t, 0);
  Elems out;
  for (int64_t k = 0; k < perThread(t.getShape(), l); ++k)
    out.push_back(b_.create<memref::LoadOp>(loc_, buf, slot(t.getShape(), k, l).flat));
  return out;
}

Layout GpuKernelLowering::layoutFrom(Attribute a) {
  auto m = dyn_cast_or_null<MmaLayoutAttr>(a);
  if (!m) return {};
  return Layout{Layout::Mma, m.getWarpsM(), m.getWarpsN(), m.getFragsM(), m.getFragsN()};
}

std::optional<Layout> GpuKernelLowering::mmaLayoutFor(DotOp d) {
  // kiln-assign-layouts' decision: the result's encoding (run() makes sure there is one).
  Layout l = layoutFrom(d.getType().getEncoding());
  if (l.kind != Layout::Mma) return std::nullopt;
  return l;
}

Dist GpuKernelLowering::dotSimt(DotOp d) {
  TileType at = d.getLhs().getType(), bt = d.getRhs().getType(), ct = d.getType();
  int64_t N = ct.getShape()[1], K = at.getShape()[1];
  Elems acc = as(tiles_.at(d.getAcc()), ct, Layout{}); // before the operands take the scratch
  int64_t aBytes = at.getNumElements() * (at.getElementType().getIntOrFloatBitWidth() / 8);
  auto bufs = stageOperands({d.getLhs(), d.getRhs()}, {0, (aBytes + 15) / 16 * 16});
  Value sa = bufs[0], sb = bufs[1];
  SmallVector<Slot> slots;
  for (int64_t k = 0; k < (int64_t)acc.size(); ++k) slots.push_back(slot(ct.getShape(), k));
  auto loop = b_.create<scf::ForOp>(loc_, cidx(0), cidx(K), cidx(1), ValueRange(acc));
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPointToStart(loop.getBody());
  Value kk = loop.getInductionVar();
  Elems next;
  for (auto [k, s] : llvm::enumerate(slots)) {
    Value ai = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, s.coords[0], cidx(K)), kk);
    Value bi = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, kk, cidx(N)), s.coords[1]);
    Value prod = b_.create<arith::MulFOp>(loc_, toF32(b_.create<memref::LoadOp>(loc_, sa, ai)),
                                          toF32(b_.create<memref::LoadOp>(loc_, sb, bi)));
    next.push_back(b_.create<arith::AddFOp>(loc_, loop.getRegionIterArgs()[k], prod));
  }
  b_.create<scf::YieldOp>(loc_, next);
  return Dist{Elems(loop.getResults()), {}, false};
}

// Tensor-core dot: A and B staged row-major in shared memory, fragments loaded per k-step
// of 16, one mma.sync.m16n8k16 (f32 accumulate) per 16x8 fragment of the warp's tile.
Dist GpuKernelLowering::dotMma(DotOp d, const Layout& l) {
  TileType at = d.getLhs().getType(), ct = d.getType();
  Elems acc = as(tiles_.at(d.getAcc()), ct, l); // before the operands take the scratch
  int64_t aBytes = at.getNumElements() * 2;
  int64_t bOff = (aBytes + 15) / 16 * 16;
  // B = transpose(x): x staged as it is, N x K, which is how mma wants B's fragments.
  auto folded = transposedOf_.find(d.getRhs());
  const bool bT = folded != transposedOf_.end();
  auto bufs = stageOperands({d.getLhs(), bT ? folded->second : d.getRhs()}, {0, bOff});
  return Dist{mmaLoop(bufs[0], bufs[1], at, ct, l, acc, bT), l, false};
}

DotOp GpuKernelLowering::foldsTranspose(TransposeOp tr) {
  if (!tr->hasOneUse()) return {};
  auto d = dyn_cast<DotOp>(*tr->user_begin());
  if (!d || d.getRhs() != tr.getResult() || d.getLhs() == tr.getResult() || d->getBlock() != tr->getBlock() ||
      !mmaLayoutFor(d))
    return {};
  return d;
}

Elems GpuKernelLowering::mmaLoop(Value bufA, Value bufB, TileType at, TileType ct, const Layout& l, ValueRange acc,
                                 bool bT) {
  Type e = at.getElementType();
  int64_t N = ct.getShape()[1], K = at.getShape()[1];
  // Fragments come from shared memory with ldmatrix: .x4 gives a 16x16 A fragment, .x2.trans
  // a 16x8 B fragment from row-major [K][N] (the transpose turns rows of B into the
  // k-pairs mma's "col" operand wants). Every row address is 16-byte aligned: K and N are
  // multiples of 8 and both buffers start on 16 bytes.
  Type i32 = b_.getI32Type();
  auto sharedAddr = [&](Value buf) { // the buffer's 32-bit address in the shared window
    Value p = b_.create<memref::ExtractAlignedPointerAsIndexOp>(loc_, buf);
    return b_.create<arith::IndexCastOp>(loc_, i32, p).getResult();
  };
  Value aBase = sharedAddr(bufA), bBase = sharedAddr(bufB);
  Value w = warp(), ln = lane();
  Value warpRow = b_.create<arith::MulIOp>(loc_, b_.create<arith::DivUIOp>(loc_, w, cidx(l.wn)), cidx(l.tm * 16));
  Value warpCol = b_.create<arith::MulIOp>(loc_, b_.create<arith::RemUIOp>(loc_, w, cidx(l.wn)), cidx(l.tn * 8));
  Value l16 = b_.create<arith::RemUIOp>(loc_, ln, cidx(16));
  Value aCol = b_.create<arith::MulIOp>(loc_, b_.create<arith::DivUIOp>(loc_, ln, cidx(16)), cidx(8));
  auto toI32 = [&](Value idx) { return b_.create<arith::IndexCastOp>(loc_, i32, idx).getResult(); };
  // nvvm.ldmatrix: n 8x8 matrices of 16-bit elements, transposed for B (which mma's "col"
  // operand wants K-major); `addr` is this lane's row address in the shared window.
  auto sharedPtr = LLVM::LLVMPointerType::get(b_.getContext(), 3);
  auto ldmatrix = [&](int n, bool trans, Value addr) {
    Value ptr = b_.create<LLVM::IntToPtrOp>(loc_, sharedPtr, addr);
    SmallVector<Type> regs(n, i32);
    auto st = LLVM::LLVMStructType::getLiteral(b_.getContext(), regs);
    auto op = b_.create<NVVM::LdMatrixOp>(loc_, st, ptr, uint32_t(n), trans ? NVVM::MMALayout::col : NVVM::MMALayout::row,
                                          NVVM::LdStMatrixShapeAttr::get(b_.getContext(), 8, 8),
                                          NVVM::LdStMatrixEltType::B16);
    SmallVector<Value> out;
    for (int r = 0; r < n; ++r)
      out.push_back(b_.create<LLVM::ExtractValueOp>(loc_, op.getRes(), ArrayRef<int64_t>{r}));
    return out;
  };
  auto loop = b_.create<scf::ForOp>(loc_, cidx(0), cidx(K / 16), cidx(1), ValueRange(acc));
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPointToStart(loop.getBody());
  Value kStep = b_.create<arith::MulIOp>(loc_, loop.getInductionVar(), cidx(16));
  // A: lane l addresses row (l % 16) of the fragment at column (l / 16) * 8.
  auto aFrag = [&](int64_t tmi) {
    Value row = b_.create<arith::AddIOp>(loc_, warpRow, b_.create<arith::AddIOp>(loc_, l16, cidx(tmi * 16)));
    Value col = b_.create<arith::AddIOp>(loc_, kStep, aCol);
    Value flat = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, row, cidx(K)), col);
    return ldmatrix(4, false, b_.create<arith::AddIOp>(loc_, aBase, toI32(b_.create<arith::MulIOp>(loc_, flat, cidx(2)))));
  };
  // B: lanes 0-15 address rows k..k+15 of the 16x8 block at column n (lanes 16-31 repeat).
  // Transposed (N x K), untransposed loads: lanes 0-7 address rows n..n+7 at column k, lanes
  // 8-15 the same rows at k + 8.
  auto bFrag = [&](int64_t tni) {
    Value n0 = b_.create<arith::AddIOp>(loc_, warpCol, cidx(tni * 8));
    Value row = bT ? b_.create<arith::AddIOp>(loc_, n0, b_.create<arith::RemUIOp>(loc_, l16, cidx(8))).getResult()
                   : b_.create<arith::AddIOp>(loc_, kStep, l16).getResult();
    Value col = bT ? b_.create<arith::AddIOp>(loc_, kStep, b_.create<arith::MulIOp>(loc_, b_.create<arith::DivUIOp>(loc_, l16, cidx(8)), cidx(8))).getResult()
                   : n0;
    Value flat = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, row, cidx(bT ? K : N)), col);
    return ldmatrix(2, !bT, b_.create<arith::AddIOp>(loc_, bBase, toI32(b_.create<arith::MulIOp>(loc_, flat, cidx(2)))));
  };
  // nvvm.mma.sync m16n8k16, row x col, f32 accumulators. Its bf16 operands are i32 pairs
  // as ldmatrix gives them; its f16 ones are f16x2 vectors (the same bits).
  auto f32 = b_.getF32Type();
  auto resT = LLVM::LLVMStructType::getLiteral(b_.getContext(), {f32, f32, f32, f32});
  const bool bf16 = e.isBF16();
  auto pair = [&](Value r) {
    return bf16 ? r : b_.create<LLVM::BitcastOp>(loc_, VectorType::get({2}, b_.getF16Type()), r).getResult();
  };
  const NVVM::MMATypes type = bf16 ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
  Elems next(acc.size());
  ValueRange c = loop.getRegionIterArgs();
  SmallVector<SmallVector<Value>> bfrag;
  for (int64_t tni = 0; tni < l.tn; ++tni) bfrag.push_back(bFrag(tni));
  for (int64_t tmi = 0; tmi < l.tm; ++tmi) {
    SmallVector<Value> a = aFrag(tmi);
    for (int64_t tni = 0; tni < l.tn; ++tni) {
      int64_t base = (tmi * l.tn + tni) * 4;
      SmallVector<Value> opA{pair(a[0]), pair(a[1]), pair(a[2]), pair(a[3])};
      SmallVector<Value> opB{pair(bfrag[tni][0]), pair(bfrag[tni][1])};
      SmallVector<Value> opC{c[base], c[base + 1], c[base + 2], c[base + 3]};
      auto mma = b_.create<NVVM::MmaOp>(loc_, resT, opA, opB, opC, ArrayRef<int64_t>{16, 8, 16},
                                        std::optional<NVVM::MMAB1Op>(), std::optional<NVVM::MMAIntOverflow>(),
                                        std::array<NVVM::MMATypes, 2>{type, type},
                                        std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row, NVVM::MMALayout::col});
      for (int64_t r = 0; r < 4; ++r)
        next[base + r] = b_.create<LLVM::ExtractValueOp>(loc_, mma.getRes(), ArrayRef<int64_t>{r});
    }
  }
  b_.create<scf::YieldOp>(loc_, next);
  return Elems(loop.getResults());
}

} // namespace kiln::portable
