#pragma once
// Internal: the memref a tile.view reads through, for every backend. A view of a rank-R
// tensor with a rank-r tile (r < R) fixes the tensor's R - r leading dims at the element
// indices it names (a batch, a head) and tiles the rest; its base is the rank-r slice there.
#include "Dialect/Tile/TileDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace kiln {

/// `tensor` (a strided memref of the view's tensor) with the view's leading dims fixed at
/// `leading` (index values, one per fixed dim): a rank-r strided memref of the trailing dims.
/// Where a leading index lies outside its dim the slice has no elements (sizes 0), so every
/// access through it is masked off. `tensor` itself when nothing is fixed.
mlir::Value sliceLeadingDims(mlir::OpBuilder& b, mlir::Location loc, mlir::Value tensor, mlir::ValueRange leading);

/// `slice` (a strided memref) with dim `dim` narrowed to elements [start, start + size),
/// clipped to the dim: no elements where start lies past it or size is not positive.
mlir::Value windowDim(mlir::OpBuilder& b, mlir::Location loc, mlir::Value slice, int64_t dim, mlir::Value start,
                      mlir::Value size);

/// The memref that view `v`'s tile indices count into: `tensor` (the view's tensor as a
/// strided memref) with the leading dims fixed (sliceLeadingDims), then its window applied
/// (windowDim). `index` maps the view's index operands to the lowering's values.
mlir::Value viewBase(mlir::OpBuilder& b, mlir::Location loc, mlir::Value tensor, tile::ViewOp v,
                     llvm::function_ref<mlir::Value(mlir::Value)> index);

/// tile.read: element `indices` of `tensor` (a strided i32 memref) as an index, 0 where an
/// index lies outside its dim (no access is made there).
mlir::Value readIndex(mlir::OpBuilder& b, mlir::Location loc, mlir::Value tensor, mlir::ValueRange indices);

} // namespace kiln
