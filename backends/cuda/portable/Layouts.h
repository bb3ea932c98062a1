#pragma once
// Internal: the portable CUDA lowering's layout decisions, made by kiln-assign-layouts and
// recorded in the IR, then followed by kiln-lower-to-gpu:
//  - on each tile.dot, `tile.layout`: #tile.mma<...> when it runs on the tensor cores
//    (mma.sync.m16n8k16: bf16/f16 operands, shapes in whole fragments), else #tile.blocked;
//  - on each tile.loop, `tile.carried_layouts`: per carried tile, #tile.mma<...> when the
//    body yields a tensor-core accumulator (through elementwise ops), else #tile.blocked.
#include "Dialect/Tile/TileDialect.h"

namespace kiln::portable {

inline constexpr const char* kLayoutAttr = "tile.layout";
inline constexpr const char* kCarriedLayoutsAttr = "tile.carried_layouts";

/// The tensor-core layout for `d` with `warps` warps per CTA, or null when it does not fit.
tile::MmaLayoutAttr mmaLayoutFor(tile::DotOp d, int64_t warps);

/// The layout `v` takes once lowered, as far as the IR decides it: the mma layout of the
/// tensor-core dot it comes from through elementwise ops, else blocked.
mlir::Attribute predictLayout(mlir::Value v, int64_t warps);

/// Records both decisions on every dot and loop of `kernel`.
void assignLayouts(tile::KernelOp kernel, int64_t warps);

} // namespace kiln::portable
