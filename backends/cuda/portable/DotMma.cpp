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

Layout GpuKernelLowering::layoutFrom(Attribute a, int64_t rank) {
  auto m = dyn_cast_or_null<MmaLayoutAttr>(a);
  if (!m) return {};
  return Layout{rank == 1 ? Layout::MmaRows : Layout::Mma, m.getWarpsM(), m.getWarpsN(), m.getFragsM(), m.getFragsN()};
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
  auto bufs = stageOperands({d.getLhs(), d.getRhs()}, {0, stagedBytes(at)});
  const int64_t pa = pitchOf(at), pb = pitchOf(bt);
  Value sa = bufs[0], sb = bufs[1];
  SmallVector<Slot> slots;
  for (int64_t k = 0; k < (int64_t)acc.size(); ++k) slots.push_back(slot(ct.getShape(), k));
  auto loop = b_.create<scf::ForOp>(loc_, cidx(0), cidx(K), cidx(1), ValueRange(acc));
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPointToStart(loop.getBody());
  Value kk = loop.getInductionVar();
  Elems next;
  for (auto [k, s] : llvm::enumerate(slots)) {
    Value ai = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, s.coords[0], cidx(pa)), kk);
    Value bi = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, kk, cidx(pb)), s.coords[1]);
    Value prod = b_.create<arith::MulFOp>(loc_, toF32(b_.create<memref::LoadOp>(loc_, sa, ai)),
                                          toF32(b_.create<memref::LoadOp>(loc_, sb, bi)));
    next.push_back(b_.create<arith::AddFOp>(loc_, loop.getRegionIterArgs()[k], prod));
  }
  b_.create<scf::YieldOp>(loc_, next);
  return Dist{Elems(loop.getResults()), {}, false};
}

// Tensor-core dot: A and B staged row-major in shared memory, fragments loaded per k-step
// of 16, one mma.sync.m16n8k16 (f32 accumulate) per 16x8 fragment of the warp's tile. A
// loop-invariant A is staged once before its loop (residentA_); an accumulator of this dot's
// rows (P V) gives A's fragments from its registers.
Dist GpuKernelLowering::dotMma(DotOp d, const Layout& l) {
  TileType at = d.getLhs().getType(), ct = d.getType();
  Elems acc = as(tiles_.at(d.getAcc()), ct, l); // before the operands take the scratch
  // B = transpose(x): x staged as it is, N x K, which is how mma wants B's fragments.
  auto folded = transposedOf_.find(d.getRhs());
  const bool bT = folded != transposedOf_.end();
  Value b = bT ? folded->second : d.getRhs();
  if (auto it = residentA_.find(d.getOperation()); it != residentA_.end()) {
    Value bufB = stageOperands({b}, {0})[0];
    return Dist{mmaLoop(it->second, bufB, at, ct, l, acc, bT), l, false};
  }
  // (A loaded only for this dot has no registers: direct_ copies it.)
  auto lhs = tiles_.find(d.getLhs());
  AFrags regs = lhs != tiles_.end() ? aFragsFromAccumulator(lhs->second, at, l) : AFrags();
  if (!regs.empty()) {
    Value bufB = stageOperands({b}, {0})[0];
    return Dist{mmaLoop(Value(), bufB, at, ct, l, acc, bT, &regs), l, false};
  }
  auto bufs = stageOperands({d.getLhs(), b}, {0, stagedBytes(at)});
  return Dist{mmaLoop(bufs[0], bufs[1], at, ct, l, acc, bT), l, false};
}

// An accumulator as mma's A operand without leaving the registers (FlashAttention's P V):
// lane l of an m16n8 accumulator fragment holds row l/4 (and l/4 + 8), columns 2(l%4) and
// 2(l%4)+1; A's m16k16 fragment wants the same rows and columns, and columns 8-15 of it are
// the next accumulator fragment's. So k-step kk's A registers are the pairs of fragments 2kk
// and 2kk+1, packed two 16-bit values to a register. Needs the same warps on the same rows
// (wm, tm) with each warp holding whole rows (wn = 1 on both).
GpuKernelLowering::AFrags GpuKernelLowering::aFragsFromAccumulator(const Dist& a, TileType at, const Layout& l) {
  const Layout& p = a.layout;
  const int64_t K = at.getShape()[1];
  if (a.uniform || p.kind != Layout::Mma || p.wn != 1 || l.wn != 1 || p.wm != l.wm || p.tm != l.tm || p.tn * 8 != K)
    return {};
  Type e = at.getElementType();
  auto pack = [&](Value lo, Value hi) {
    Value v = b_.create<LLVM::PoisonOp>(loc_, VectorType::get({2}, e));
    v = b_.create<LLVM::InsertElementOp>(loc_, v, lo, b_.create<LLVM::ConstantOp>(loc_, b_.getI32Type(), 0));
    v = b_.create<LLVM::InsertElementOp>(loc_, v, hi, b_.create<LLVM::ConstantOp>(loc_, b_.getI32Type(), 1));
    return b_.create<LLVM::BitcastOp>(loc_, b_.getI32Type(), v).getResult();
  };
  AFrags out(size_t(K / 16));
  for (int64_t kk = 0; kk < K / 16; ++kk)
    for (int64_t tmi = 0; tmi < l.tm; ++tmi) {
      const size_t f0 = size_t((tmi * p.tn + 2 * kk) * 4), f1 = f0 + 4;
      out[size_t(kk)].push_back({pack(a.v[f0], a.v[f0 + 1]), pack(a.v[f0 + 2], a.v[f0 + 3]),
                                 pack(a.v[f1], a.v[f1 + 1]), pack(a.v[f1 + 2], a.v[f1 + 3])});
    }
  return out;
}

Value GpuKernelLowering::sharedAddr32(Value buf) {
  Value p = b_.create<memref::ExtractAlignedPointerAsIndexOp>(loc_, buf);
  return b_.create<arith::IndexCastOp>(loc_, b_.getI32Type(), p).getResult();
}

// nvvm.ldmatrix: n 8x8 matrices of 16-bit elements, transposed for B (which mma's "col"
// operand wants K-major); `addr` is this lane's row address in the shared window.
SmallVector<Value> GpuKernelLowering::ldmatrix(int n, bool trans, Value addr) {
  Type i32 = b_.getI32Type();
  Value ptr = b_.create<LLVM::IntToPtrOp>(loc_, LLVM::LLVMPointerType::get(b_.getContext(), 3), addr);
  SmallVector<Type> parts(n, i32);
  auto st = LLVM::LLVMStructType::getLiteral(b_.getContext(), parts);
  auto op = b_.create<NVVM::LdMatrixOp>(loc_, st, ptr, uint32_t(n), trans ? NVVM::MMALayout::col : NVVM::MMALayout::row,
                                        NVVM::LdStMatrixShapeAttr::get(b_.getContext(), 8, 8),
                                        NVVM::LdStMatrixEltType::B16);
  SmallVector<Value> out;
  for (int r = 0; r < n; ++r) out.push_back(b_.create<LLVM::ExtractValueOp>(loc_, op.getRes(), ArrayRef<int64_t>{r}));
  return out;
}

// A's 16x16 fragment `tmi` of this warp at column kStep, from A staged row-major (K columns)
// at shared address aBase: lane l addresses row (l % 16) of the fragment at column (l / 16) * 8.
SmallVector<Value> GpuKernelLowering::aFragShared(Value aBase, TileType at, const Layout& l, Value kStep, int64_t tmi) {
  const int64_t K = at.getShape()[1];
  Value ln = lane();
  Value warpRow = b_.create<arith::MulIOp>(loc_, b_.create<arith::DivUIOp>(loc_, warp(), cidx(l.wn)), cidx(l.tm * 16));
  Value row = b_.create<arith::AddIOp>(loc_, warpRow, b_.create<arith::AddIOp>(loc_, b_.create<arith::RemUIOp>(loc_, ln, cidx(16)), cidx(tmi * 16)));
  Value col = b_.create<arith::AddIOp>(loc_, kStep, b_.create<arith::MulIOp>(loc_, b_.create<arith::DivUIOp>(loc_, ln, cidx(16)), cidx(8)));
  Value flat = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, row, cidx(pitchOf(at))), col);
  Value off = b_.create<arith::IndexCastOp>(loc_, b_.getI32Type(), b_.create<arith::MulIOp>(loc_, flat, cidx(2)));
  return ldmatrix(4, false, b_.create<arith::AddIOp>(loc_, aBase, off));
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
                                 bool bT, const AFrags* regs) {
  Type e = at.getElementType();
  int64_t N = ct.getShape()[1], K = at.getShape()[1];
  // B as staged: N x K when transposed, else K x N, at its pitchOf.
  const int64_t bPitch = pitchFor(bT ? K : N, e);
  // Fragments come from shared memory with ldmatrix: .x4 gives a 16x16 A fragment, .x2.trans
  // a 16x8 B fragment from row-major [K][N] (the transpose turns rows of B into the
  // k-pairs mma's "col" operand wants). Every row address is 16-byte aligned: K and N are
  // multiples of 8 and both buffers start on 16 bytes.
  Value aBase = bufA ? sharedAddr32(bufA) : Value(), bBase = sharedAddr32(bufB);
  Value w = warp(), ln = lane();
  Value warpCol = b_.create<arith::MulIOp>(loc_, b_.create<arith::RemUIOp>(loc_, w, cidx(l.wn)), cidx(l.tn * 8));
  Value l16 = b_.create<arith::RemUIOp>(loc_, ln, cidx(16));
  Type i32 = b_.getI32Type();
  auto toI32 = [&](Value idx) { return b_.create<arith::IndexCastOp>(loc_, i32, idx).getResult(); };
  // One k-step: A's fragments from `aFrag(tmi)`, B's by ldmatrix, tm x tn mma.sync.
  auto f32 = b_.getF32Type();
  auto resT = LLVM::LLVMStructType::getLiteral(b_.getContext(), {f32, f32, f32, f32});
  const bool bf16 = e.isBF16();
  auto pair = [&](Value r) {
    return bf16 ? r : b_.create<LLVM::BitcastOp>(loc_, VectorType::get({2}, b_.getF16Type()), r).getResult();
  };
  const NVVM::MMATypes type = bf16 ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
  Value kStep;
  auto aShared = [&](int64_t tmi) { return aFragShared(aBase, at, l, kStep, tmi); };
  // B: lanes 0-15 address rows k..k+15 of the 16x8 block at column n (lanes 16-31 repeat).
  // Transposed (N x K), untransposed loads: lanes 0-7 address rows n..n+7 at column k, lanes
  // 8-15 the same rows at k + 8.
  auto bFrag = [&](int64_t tni) {
    Value n0 = b_.create<arith::AddIOp>(loc_, warpCol, cidx(tni * 8));
    Value row = bT ? b_.create<arith::AddIOp>(loc_, n0, b_.create<arith::RemUIOp>(loc_, l16, cidx(8))).getResult()
                   : b_.create<arith::AddIOp>(loc_, kStep, l16).getResult();
    Value col = bT ? b_.create<arith::AddIOp>(loc_, kStep, b_.create<arith::MulIOp>(loc_, b_.create<arith::DivUIOp>(loc_, l16, cidx(8)), cidx(8))).getResult()
                   : n0;
    Value flat = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, row, cidx(bPitch)), col);
    return ldmatrix(2, !bT, b_.create<arith::AddIOp>(loc_, bBase, toI32(b_.create<arith::MulIOp>(loc_, flat, cidx(2)))));
  };
  // Fragments tni and tni + 1 in one ldmatrix.x4 (half the shared-memory instructions):
  // lanes 16-31 address the second fragment as lanes 0-15 do the first, 8 columns of N
  // further (8 rows of the N x K transposed B further).
  Value ln16 = b_.create<arith::DivUIOp>(loc_, ln, cidx(16));
  auto bFragPair = [&](int64_t tni) {
    Value n0 = b_.create<arith::AddIOp>(loc_, warpCol, cidx(tni * 8));
    Value second = b_.create<arith::MulIOp>(loc_, ln16, cidx(8));
    Value row = bT ? b_.create<arith::AddIOp>(loc_, b_.create<arith::AddIOp>(loc_, n0, second),
                                              b_.create<arith::RemUIOp>(loc_, l16, cidx(8))).getResult()
                   : b_.create<arith::AddIOp>(loc_, kStep, l16).getResult();
    Value col = bT ? b_.create<arith::AddIOp>(loc_, kStep, b_.create<arith::MulIOp>(loc_, b_.create<arith::DivUIOp>(loc_, l16, cidx(8)), cidx(8))).getResult()
                   : b_.create<arith::AddIOp>(loc_, n0, second).getResult();
    Value flat = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, row, cidx(bPitch)), col);
    return ldmatrix(4, !bT, b_.create<arith::AddIOp>(loc_, bBase, toI32(b_.create<arith::MulIOp>(loc_, flat, cidx(2)))));
  };
  // nvvm.mma.sync m16n8k16, row x col, f32 accumulators. Its bf16 operands are i32 pairs
  // as ldmatrix gives them; its f16 ones are f16x2 vectors (the same bits).
  auto step = [&](ValueRange c, llvm::function_ref<SmallVector<Value>(int64_t)> aFrag) {
    Elems next(c.size());
    SmallVector<SmallVector<Value>> bfrag;
    for (int64_t tni = 0; tni < l.tn; ++tni) {
      if (tni + 1 < l.tn) {
        SmallVector<Value> four = bFragPair(tni++);
        bfrag.push_back({four[0], four[1]});
        bfrag.push_back({four[2], four[3]});
      } else {
        bfrag.push_back(bFrag(tni));
      }
    }
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
    return next;
  };
  if (regs) { // A in registers: the k-steps unrolled (each step's registers are its own values)
    Elems c(acc.begin(), acc.end());
    for (int64_t kk = 0; kk < K / 16; ++kk) {
      kStep = cidx(kk * 16);
      c = step(c, [&](int64_t tmi) { return (*regs)[size_t(kk)][size_t(tmi)]; });
    }
    return c;
  }
  auto loop = b_.create<scf::ForOp>(loc_, cidx(0), cidx(K / 16), cidx(1), ValueRange(acc));
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPointToStart(loop.getBody());
  kStep = b_.create<arith::MulIOp>(loc_, loop.getInductionVar(), cidx(16));
  b_.create<scf::YieldOp>(loc_, step(loop.getRegionIterArgs(), aShared));
  return Elems(loop.getResults());
}

} // namespace kiln::portable
