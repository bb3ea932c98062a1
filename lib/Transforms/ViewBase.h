#pragma once
// Internal: the memref a tile.view reads through, for every backend. A view of a rank-R
// tensor with a rank-r tile (r < R) fixes the tensor's R - r leading dims at the element
// indices it names (a batch, a head) and tiles the rest; its base is the rank-r slice there.
#include "Dialect/Tile/TileDialect.h"

#include "mlir/IR/Builders.h"

namespace kiln {

/// `tensor` (a strided memref of the view's tensor) with the view's leading dims fixed at
/// `leading` (index values, one per fixed dim): a rank-r strided memref of the trailing dims.
/// Where a leading index lies outside its dim the slice has no elements (sizes 0), so every
/// access through it is masked off. `tensor` itself when nothing is fixed.
mlir::Value sliceLeadingDims(mlir::OpBuilder& b, mlir::Location loc, mlir::Value tensor, mlir::ValueRange leading);

/// tile.read: element `indices` of `tensor` (a strided i32 memref) as an index, 0 where an
/// index lies outside its dim (no access is made there).
mlir::Value readIndex(mlir::OpBuilder& b, mlir::Location loc, mlir::Value tensor, mlir::ValueRange indices);

} // namespace kiln
