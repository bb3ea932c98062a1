#include "Transforms/ViewBase.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace kiln {

using namespace mlir;

Value sliceLeadingDims(OpBuilder& b, Location loc, Value tensor, ValueRange leading) {
  if (leading.empty()) return tensor;
  auto type = cast<MemRefType>(tensor.getType());
  const int64_t rank = type.getRank(), lead = int64_t(leading.size()), kept = rank - lead;
  auto meta = b.create<memref::ExtractStridedMetadataOp>(loc, tensor);
  // In range: every leading index below its dim (an index below 0 compares as a huge one).
  Value inRange;
  for (int64_t d = 0; d < lead; ++d) {
    Value ok = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, leading[size_t(d)], meta.getSizes()[size_t(d)]);
    inRange = inRange ? b.create<arith::AndIOp>(loc, inRange, ok).getResult() : ok;
  }
  Value zero = b.create<arith::ConstantIndexOp>(loc, 0);
  Value offset = meta.getOffset();
  for (int64_t d = 0; d < lead; ++d) {
    Value at = b.create<arith::SelectOp>(loc, inRange, leading[size_t(d)], zero);
    offset = b.create<arith::AddIOp>(loc, offset, b.create<arith::MulIOp>(loc, at, meta.getStrides()[size_t(d)]));
  }
  SmallVector<OpFoldResult> sizes, strides;
  for (int64_t d = lead; d < rank; ++d) {
    sizes.push_back(b.create<arith::SelectOp>(loc, inRange, meta.getSizes()[size_t(d)], zero).getResult());
    strides.push_back(meta.getStrides()[size_t(d)]);
  }
  SmallVector<int64_t> dyn(size_t(kept), ShapedType::kDynamic);
  auto sliceType = MemRefType::get(dyn, type.getElementType(),
                                   StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, dyn), type.getMemorySpace());
  return b.create<memref::ReinterpretCastOp>(loc, sliceType, meta.getBaseBuffer(), OpFoldResult(offset), sizes, strides);
}

Value windowDim(OpBuilder& b, Location loc, Value slice, int64_t dim, Value start, Value size) {
  auto type = cast<MemRefType>(slice.getType());
  auto meta = b.create<memref::ExtractStridedMetadataOp>(loc, slice);
  auto cmp = [&](arith::CmpIPredicate p, Value x, Value y) { return b.create<arith::CmpIOp>(loc, p, x, y).getResult(); };
  Value zero = b.create<arith::ConstantIndexOp>(loc, 0), extent = meta.getSizes()[size_t(dim)];
  // Inside: 0 <= start < extent (a start below 0 compares as a huge one) and size > 0.
  Value inside = b.create<arith::AndIOp>(loc, cmp(arith::CmpIPredicate::ult, start, extent),
                                         cmp(arith::CmpIPredicate::sgt, size, zero));
  Value at = b.create<arith::SelectOp>(loc, inside, start, zero);
  Value room = b.create<arith::SubIOp>(loc, extent, at);
  Value kept = b.create<arith::SelectOp>(loc, inside, b.create<arith::MinSIOp>(loc, size, room), zero);
  Value offset = b.create<arith::AddIOp>(loc, meta.getOffset(),
                                         b.create<arith::MulIOp>(loc, at, meta.getStrides()[size_t(dim)]));
  SmallVector<OpFoldResult> sizes, strides;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    sizes.push_back(d == dim ? kept : meta.getSizes()[size_t(d)]);
    strides.push_back(meta.getStrides()[size_t(d)]);
  }
  SmallVector<int64_t> dyn(size_t(type.getRank()), ShapedType::kDynamic);
  auto windowType = MemRefType::get(dyn, type.getElementType(),
                                    StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, dyn), type.getMemorySpace());
  return b.create<memref::ReinterpretCastOp>(loc, windowType, meta.getBaseBuffer(), OpFoldResult(offset), sizes, strides);
}

Value viewBase(OpBuilder& b, Location loc, Value tensor, tile::ViewOp v, llvm::function_ref<Value(Value)> index) {
  const size_t lead = v.getIndices().size() - size_t(v.getType().getRank());
  SmallVector<Value> fixed;
  for (Value idx : v.getIndices().take_front(lead)) fixed.push_back(index(idx));
  Value base = sliceLeadingDims(b, loc, tensor, fixed);
  if (!v.hasWindow()) return base;
  return windowDim(b, loc, base, int64_t(*v.getWindowDim()) - int64_t(lead), index(v.getWindowStart()),
                   index(v.getWindowSize()));
}

Value readIndex(OpBuilder& b, Location loc, Value tensor, ValueRange indices) {
  // In range: every index below its dim (an index below 0 compares as a huge one).
  Value inRange;
  for (auto [d, i] : llvm::enumerate(indices)) {
    Value dim = b.create<memref::DimOp>(loc, tensor, int64_t(d));
    Value ok = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, i, dim);
    inRange = inRange ? b.create<arith::AndIOp>(loc, inRange, ok).getResult() : ok;
  }
  auto read = b.create<scf::IfOp>(loc, TypeRange{b.getIndexType()}, inRange, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(read.thenBlock());
  Value x = b.create<memref::LoadOp>(loc, tensor, indices);
  b.create<scf::YieldOp>(loc, ValueRange{b.create<arith::IndexCastOp>(loc, b.getIndexType(), x).getResult()});
  b.setInsertionPointToStart(read.elseBlock());
  b.create<scf::YieldOp>(loc, ValueRange{b.create<arith::ConstantIndexOp>(loc, 0).getResult()});
  return read.getResult(0);
}

} // namespace kiln
