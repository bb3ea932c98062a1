#pragma once
// Internal: what GemmMatch and AttentionMatch both ask of a tile kernel.
#include <string>

#include "Dialect/Tile/TileDialect.h"

#include "llvm/ADT/SmallVector.h"


namespace kiln::hopper {

/// The kernel argument view `v` reads, or -1.
int argOf(tile::ViewOp v, tile::KernelOp k);

/// `v` is an arith.constant index of value `c`.
bool isConstIndex(mlir::Value v, int64_t c);

/// `count` is ceildiv(<dim `dim` of argument `arg`>, tile) (with a tile of 1: the dim
/// itself), symbolic or constant: a loop or grid that covers the dim exactly, tile by tile.
bool isTileCount(mlir::Value count, tile::KernelOp k, unsigned arg, unsigned dim, int64_t tile);

/// The kernel's single `dims`-dimensional tile.grid whose body holds exactly one tile.loop
/// and one tile.store (up to `maxStores`: `store` the first, `more` the rest in order);
/// false with `why` naming the rule broken. A view narrowed to a window is refused unless
/// `windows` (the caller then checks the windows itself).
struct GridLoopStore {
  tile::GridOp grid;
  tile::LoopOp loop;
  tile::StoreOp store;
  llvm::SmallVector<tile::StoreOp, 1> more;
};
bool matchGridLoopStore(tile::KernelOp k, unsigned dims, GridLoopStore& out, std::string& why,
                        unsigned maxStores = 1, bool windows = false);

} // namespace kiln::hopper
