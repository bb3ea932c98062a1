// The portable CUDA lowering: views, masked loads and stores, shared-memory staging and cp.async copies. (portable/Lowering.h)
#include "portable/Lowering.h"

namespace kiln::portable {

Value GpuKernelLowering::shared(int64_t n, Type elt, int64_t byteOffset) {
  byteOffset += scratchBase_;
  int64_t bytes = n * (elt.getIntOrFloatBitWidth() / 8);
  smemBytes_ = std::max(smemBytes_, byteOffset + bytes);
  auto ws = gpu::AddressSpaceAttr::get(b_.getContext(), gpu::AddressSpace::Workgroup);
  auto type = MemRefType::get({n}, elt, MemRefLayoutAttrInterface{}, ws);
  return b_.create<memref::ViewOp>(loc_, type, smemBase_, cidx(byteOffset), ValueRange{});
}

Value GpuKernelLowering::sharedAt(int64_t n, Type elt, Value byteOffset, int64_t maxEnd) {
  return sharedAbs(n, elt, b_.create<arith::AddIOp>(loc_, byteOffset, cidx(scratchBase_)), maxEnd + scratchBase_);
}

Value GpuKernelLowering::sharedAbs(int64_t n, Type elt, Value byteOffset, int64_t maxEnd) {
  smemBytes_ = std::max(smemBytes_, maxEnd);
  auto ws = gpu::AddressSpaceAttr::get(b_.getContext(), gpu::AddressSpace::Workgroup);
  auto type = MemRefType::get({n}, elt, MemRefLayoutAttrInterface{}, ws);
  return b_.create<memref::ViewOp>(loc_, type, smemBase_, byteOffset, ValueRange{});
}

Value GpuKernelLowering::stage(const Dist& d, TileType t, int64_t byteOffset, int64_t pitch) {
  const int64_t n = pitch ? t.getShape()[0] * pitch : t.getNumElements();
  Value buf = shared(n, t.getElementType(), byteOffset);
  barrier(); // earlier readers of the scratch are done
  write(d, t, buf, pitch);
  barrier(); // every element written before anyone reads
  return buf;
}

void GpuKernelLowering::write(const Dist& d, TileType t, Value buf, int64_t pitch) {
  Elems v = d.uniform ? as(d, t, d.layout) : d.v;
  for (int64_t k = 0; k < (int64_t)v.size(); ++k) {
    Slot s = slot(t.getShape(), k, d.layout);
    if (pitch && t.getRank() == 2)
      s.flat = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, s.coords[0], cidx(pitch)), s.coords[1]);
    if (!s.valid) {
      b_.create<memref::StoreOp>(loc_, v[k], buf, s.flat);
      continue;
    }
    auto ifOp = b_.create<scf::IfOp>(loc_, s.valid, /*withElse=*/false);
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
    b_.create<memref::StoreOp>(loc_, v[k], buf, s.flat);
  }
}

SmallVector<Value> GpuKernelLowering::stageOperands(ArrayRef<Value> tiles, ArrayRef<int64_t> offsets) {
  SmallVector<Value> bufs;
  // Operands in a loop's ring are in shared memory already, ready (lowerLoopSimple).
  if (llvm::all_of(tiles, [&](Value v) { return ringBuf_.count(v); })) {
    for (Value v : tiles) bufs.push_back(ringBuf_.at(v));
    return bufs;
  }
  barrier(); // earlier readers of the scratch are done
  bool async = false;
  for (auto [v, off] : llvm::zip(tiles, offsets)) {
    if (auto it = ringBuf_.find(v); it != ringBuf_.end()) {
      bufs.push_back(it->second);
      continue;
    }
    auto t = cast<TileType>(v.getType());
    const int64_t pitch = pitchOf(t);
    Value buf = shared(t.getRank() == 2 ? t.getShape()[0] * pitch : t.getNumElements(), t.getElementType(), off);
    if (auto it = direct_.find(v); it != direct_.end()) {
      copyGlobalToShared(it->second, t, buf, pitch);
      async = true;
    } else {
      write(tiles_.at(v), t, buf, pitch);
    }
    bufs.push_back(buf);
  }
  if (async) b_.create<NVVM::CpAsyncWaitGroupOp>(loc_, 0); // this thread's copies landed
  barrier(); // everyone's writes landed
  return bufs;
}

// Fast path when the rows are 16-byte aligned (contiguous rows, row stride and base a
// multiple of 16 bytes): each thread issues 16-byte cp.async copies, which zero-fill the
// part of a vector past the tensor's edge. Otherwise: element by element, masked.
SmallVector<Value> GpuKernelLowering::dimsOf(Value base, size_t rank) {
  SmallVector<Value> dims;
  for (size_t d = 0; d < rank; ++d) dims.push_back(b_.create<memref::DimOp>(loc_, base, d));
  return dims;
}

std::pair<SmallVector<Value>, Value> GpuKernelLowering::globalSlot(const ViewInfo& v, const Slot& s,
                                                                   ArrayRef<Value> dims) {
  SmallVector<Value> g;
  Value inb = s.valid;
  for (size_t d = 0; d < dims.size(); ++d) {
    g.push_back(b_.create<arith::AddIOp>(loc_, v.offsets[d], s.coords[d]));
    inb = andOf(inb, b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::ult, g[d], dims[d]));
  }
  return {g, inb};
}

Value GpuKernelLowering::maskedLoad(const ViewInfo& v, const Slot& s, ArrayRef<Value> dims, Type elt, double pad) {
  auto [g, inb] = globalSlot(v, s, dims);
  auto ifOp = b_.create<scf::IfOp>(loc_, TypeRange{elt}, inb, /*withElse=*/true);
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
  b_.create<scf::YieldOp>(loc_, ValueRange{b_.create<memref::LoadOp>(loc_, v.base, g)});
  b_.setInsertionPointToStart(&ifOp.getElseRegion().front());
  b_.create<scf::YieldOp>(loc_, ValueRange{constOf(elt, pad)});
  return ifOp.getResult(0);
}

void GpuKernelLowering::copyGlobalToShared(const ViewInfo& v, TileType t, Value buf, int64_t pitch, bool commit) {
  ArrayRef<int64_t> shape = t.getShape();
  int64_t bytes = t.getElementType().getIntOrFloatBitWidth() / 8;
  int64_t vec = 16 / bytes, cols = shape.back();
  // The fallback, element by element and masked, as a loop over this thread's elements:
  // unaligned rows are rare, and unrolled it was most of a kernel's code (and of its compile
  // time: attention copies three tiles this way).
  auto scalarCopy = [&]() {
    SmallVector<Value> dims = dimsOf(v.base, shape.size());
    const int64_t n = numel(shape), steps = perThread(shape);
    auto loop = b_.create<scf::ForOp>(loc_, cidx(0), cidx(steps), cidx(1));
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(loop.getBody());
    Slot s;
    Value e = b_.create<arith::AddIOp>(loc_, tid_, b_.create<arith::MulIOp>(loc_, loop.getInductionVar(), cidx(T_)));
    if (steps * T_ > n) { // the last step may run past the tile: clamp, and mark
      s.valid = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::ult, e, cidx(n));
      e = b_.create<arith::MinUIOp>(loc_, e, cidx(n - 1));
    }
    s.flat = e;
    s.coords.resize(shape.size());
    for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
      s.coords[size_t(d)] = d == 0 ? e : b_.create<arith::RemUIOp>(loc_, e, cidx(shape[size_t(d)])).getResult();
      if (d > 0) e = b_.create<arith::DivUIOp>(loc_, e, cidx(shape[size_t(d)]));
    }
    Value val = maskedLoad(v, s, dims, t.getElementType(), 0.0);
    if (shape.size() == 2)
      s.flat = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, s.coords[0], cidx(pitch)), s.coords[1]);
    if (!s.valid) {
      b_.create<memref::StoreOp>(loc_, val, buf, s.flat);
      return;
    }
    auto w = b_.create<scf::IfOp>(loc_, s.valid, false);
    b_.setInsertionPointToStart(&w.getThenRegion().front());
    b_.create<memref::StoreOp>(loc_, val, buf, s.flat);
  };
  if (shape.size() != 2 || cols % vec != 0) return scalarCopy();
  // The view's strides and base decide at run time which path this CTA takes.
  auto ifOp = b_.create<scf::IfOp>(loc_, rowsAligned(v.base, t), /*withElse=*/true);
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
  asyncCopy(v, t, buf, pitch);
  if (commit) b_.create<NVVM::CpAsyncCommitGroupOp>(loc_);
  b_.setInsertionPointToStart(&ifOp.getElseRegion().front());
  scalarCopy();
}

Value GpuKernelLowering::rowsAligned(Value base, TileType t) {
  int64_t bytes = t.getElementType().getIntOrFloatBitWidth() / 8, vec = 16 / bytes;
  auto meta = b_.create<memref::ExtractStridedMetadataOp>(loc_, base);
  Value ptr = b_.create<memref::ExtractAlignedPointerAsIndexOp>(loc_, base);
  Value addr = b_.create<arith::AddIOp>(loc_, ptr, b_.create<arith::MulIOp>(loc_, meta.getOffset(), cidx(bytes)));
  Value c0 = cidx(0);
  auto eq = [&](Value a, Value bv) { return b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::eq, a, bv).getResult(); };
  Value ok = eq(b_.create<arith::RemUIOp>(loc_, addr, cidx(16)), c0);
  ok = andOf(ok, eq(meta.getStrides()[1], cidx(1)));
  return andOf(ok, eq(b_.create<arith::RemUIOp>(loc_, meta.getStrides()[0], cidx(vec)), c0));
}

Value GpuKernelLowering::unitInnerStride(Value base) {
  auto meta = b_.create<memref::ExtractStridedMetadataOp>(loc_, base);
  auto type = cast<MemRefType>(base.getType());
  auto unit = MemRefType::get(type.getShape(), type.getElementType(),
                              StridedLayoutAttr::get(b_.getContext(), ShapedType::kDynamic,
                                                     {ShapedType::kDynamic, 1}),
                              type.getMemorySpace());
  return b_.create<memref::ReinterpretCastOp>(
      loc_, unit, meta.getBaseBuffer(), OpFoldResult(meta.getOffset()),
      ArrayRef<OpFoldResult>{meta.getSizes()[0], meta.getSizes()[1]},
      ArrayRef<OpFoldResult>{meta.getStrides()[0], b_.getIndexAttr(1)});
}

void GpuKernelLowering::storeMmaPairs(const ViewInfo& v, TileType t, const Layout& layout, const Elems& src) {
  int64_t bytes = t.getElementType().getIntOrFloatBitWidth() / 8;
  // Pairs need: unit inner stride, an even row stride, a base aligned to two elements.
  auto meta = b_.create<memref::ExtractStridedMetadataOp>(loc_, v.base);
  Value ptr = b_.create<memref::ExtractAlignedPointerAsIndexOp>(loc_, v.base);
  Value addr = b_.create<arith::AddIOp>(loc_, ptr, b_.create<arith::MulIOp>(loc_, meta.getOffset(), cidx(bytes)));
  Value c0 = cidx(0);
  auto eq = [&](Value a, Value bv) { return b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::eq, a, bv).getResult(); };
  Value ok = eq(b_.create<arith::RemUIOp>(loc_, addr, cidx(2 * bytes)), c0);
  ok = andOf(ok, eq(meta.getStrides()[1], cidx(1)));
  ok = andOf(ok, eq(b_.create<arith::RemUIOp>(loc_, meta.getStrides()[0], cidx(2)), c0));
  SmallVector<Value> dims = dimsOf(v.base, 2);
  auto scalar = [&](int64_t k) {
    auto [g, inb] = globalSlot(v, slot(t.getShape(), k, layout), dims);
    auto w = b_.create<scf::IfOp>(loc_, inb, /*withElse=*/false);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(&w.getThenRegion().front());
    b_.create<memref::StoreOp>(loc_, src[k], v.base, g);
  };
  auto ifOp = b_.create<scf::IfOp>(loc_, ok, /*withElse=*/true);
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
  Value unit = unitInnerStride(v.base);
  auto vecType = VectorType::get({2}, t.getElementType());
  // Registers k and k+1 (k even) of an mma fragment are columns c and c+1 of one row.
  for (int64_t k = 0; k + 1 < (int64_t)src.size(); k += 2) {
    auto [g, inb] = globalSlot(v, slot(t.getShape(), k, layout), dims);
    Value next = b_.create<arith::AddIOp>(loc_, g[1], cidx(1));
    Value both = andOf(inb, b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::ult, next, dims[1]));
    auto pair = b_.create<scf::IfOp>(loc_, both, /*withElse=*/true);
    OpBuilder::InsertionGuard g2(b_);
    b_.setInsertionPointToStart(&pair.getThenRegion().front());
    Value vec = b_.create<vector::FromElementsOp>(loc_, vecType, ValueRange{src[k], src[k + 1]});
    b_.create<vector::StoreOp>(loc_, vec, unit, g);
    b_.setInsertionPointToStart(&pair.getElseRegion().front());
    scalar(k);
    scalar(k + 1);
  }
  b_.setInsertionPointToStart(&ifOp.getElseRegion().front());
  for (int64_t k = 0; k < (int64_t)src.size(); ++k) scalar(k);
}

void GpuKernelLowering::asyncCopy(const ViewInfo& v, TileType t, Value buf, int64_t pitch) {
  ArrayRef<int64_t> shape = t.getShape();
  int64_t bytes = t.getElementType().getIntOrFloatBitWidth() / 8;
  int64_t vec = 16 / bytes, cols = shape.back();
  Value c0 = cidx(0);
  Value src = unitInnerStride(v.base);
  Value dim0 = b_.create<memref::DimOp>(loc_, src, 0), dim1 = b_.create<memref::DimOp>(loc_, src, 1);
  Value lastRow = b_.create<arith::MaxSIOp>(loc_, b_.create<arith::SubIOp>(loc_, dim0, cidx(1)), c0);
  int64_t vecsPerRow = cols / vec, nvec = shape[0] * vecsPerRow;
  for (int64_t k = 0; k * T_ < nvec; ++k) {
    Value e = b_.create<arith::AddIOp>(loc_, tid_, cidx(k * T_));
    Value valid;
    if ((k + 1) * T_ > nvec) {
      valid = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::ult, e, cidx(nvec));
      e = b_.create<arith::MinUIOp>(loc_, e, cidx(nvec - 1));
    }
    Value r = b_.create<arith::DivUIOp>(loc_, e, cidx(vecsPerRow));
    Value c = b_.create<arith::MulIOp>(loc_, b_.create<arith::RemUIOp>(loc_, e, cidx(vecsPerRow)), cidx(vec));
    Value gr = b_.create<arith::AddIOp>(loc_, v.offsets[0], r);
    Value gc = b_.create<arith::AddIOp>(loc_, v.offsets[1], c);
    // Elements of this vector inside the tensor: 0 past the last row, else what is left
    // of the row (clamped to 0..vec). The rest is zero-filled by the copy.
    Value left = b_.create<arith::SubIOp>(loc_, dim1, gc);
    left = b_.create<arith::MinSIOp>(loc_, b_.create<arith::MaxSIOp>(loc_, left, c0), cidx(vec));
    Value rowIn = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::slt, gr, dim0);
    Value n = b_.create<arith::SelectOp>(loc_, rowIn, left, c0);
    Value srcRow = b_.create<arith::MinSIOp>(loc_, gr, lastRow);
    Value srcCol = b_.create<arith::SelectOp>(loc_, b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::sgt, n, c0), gc, c0);
    Value dst = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, r, cidx(pitch)), c);
    auto copy = [&]() {
      b_.create<nvgpu::DeviceAsyncCopyOp>(loc_, nvgpu::DeviceAsyncTokenType::get(b_.getContext()), buf,
                                          ValueRange{dst}, src, ValueRange{srcRow, srcCol},
                                          b_.getIndexAttr(vec), n, UnitAttr());
    };
    if (!valid) {
      copy();
    } else {
      auto w = b_.create<scf::IfOp>(loc_, valid, false);
      OpBuilder::InsertionGuard g2(b_);
      b_.setInsertionPointToStart(&w.getThenRegion().front());
      copy();
    }
  }
}

LogicalResult GpuKernelLowering::lowerLoad(LoadOp l) {
  if (prefetched_.contains(l)) return success(); // issued an iteration ahead by its loop
  const ViewInfo& v = views_.at(l.getView());
  if (l->hasOneUse() && l.getPadding().isZero()) {
    auto dot = dyn_cast<DotOp>(*l->user_begin());
    // Also the input of a transpose that a tensor-core dot reads in place (foldsTranspose).
    if (auto tr = dyn_cast<TransposeOp>(*l->user_begin())) dot = foldsTranspose(tr);
    // Deferring the read to the dot is safe only if nothing in between writes.
    auto writesBefore = [&](Operation* end) {
      for (Operation* o = l->getNextNode(); o && o != end; o = o->getNextNode())
        if (isa<StoreOp>(o) || o->getNumRegions() > 0) return true;
      return false;
    };
    if (dot && dot.getAcc() != l.getResult() && dot->getBlock() == l->getBlock() &&
        !writesBefore(dot)) {
      direct_[l.getResult()] = v;
      return success();
    }
    // A of a tensor-core dot in a loop right below: copied straight into the shared memory
    // the loop keeps it in (hoistLoopInvariantA), never through registers.
    auto loop = dot ? dyn_cast<LoopOp>(dot->getParentOp()) : LoopOp();
    if (dot && dot.getLhs() == l.getResult() && loop && loop->getBlock() == l->getBlock() &&
        dot->getBlock() == &loop.getBody().front() && mmaLayoutFor(dot) && !writesBefore(loop)) {
      direct_[l.getResult()] = v;
      return success();
    }
  }
  TileType t = l.getType();
  SmallVector<Value> dims = dimsOf(v.base, v.shape.size());
  Elems out;
  for (int64_t k = 0; k < perThread(t.getShape()); ++k)
    out.push_back(maskedLoad(v, slot(t.getShape(), k), dims, t.getElementType(),
                             l.getPadding().convertToDouble()));
  tiles_[l.getResult()] = Dist{out, {}, false};
  return success();
}

LogicalResult GpuKernelLowering::lowerStore(StoreOp st) {
  const ViewInfo& v = views_.at(st.getView());
  TileType t = st.getValue().getType();
  const Dist& d = tiles_.at(st.getValue());
  Layout layout = d.uniform ? Layout{} : d.layout;
  Elems src = as(d, t, layout);
  if (layout.kind == Layout::Mma) {
    storeMmaPairs(v, t, layout, src);
    return success();
  }
  SmallVector<Value> dims = dimsOf(v.base, v.shape.size());
  // A row held by a quad's 4 lanes and the wn warps along N is stored once, by lane 0 of the
  // quad in the first of those warps.
  Value owner;
  if (layout.kind == Layout::MmaRows)
    owner = andOf(b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::eq, b_.create<arith::RemUIOp>(loc_, lane(), cidx(4)), cidx(0)),
                  b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::eq, b_.create<arith::RemUIOp>(loc_, warp(), cidx(layout.wn)), cidx(0)));
  for (int64_t k = 0; k < (int64_t)src.size(); ++k) {
    auto [g, inb] = globalSlot(v, slot(t.getShape(), k, layout), dims);
    inb = andOf(inb, owner);
    auto ifOp = b_.create<scf::IfOp>(loc_, inb, /*withElse=*/false);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
    b_.create<memref::StoreOp>(loc_, src[k], v.base, g);
  }
  return success();
}

} // namespace kiln::portable
