#pragma once
// Internal: the portable CUDA lowering's layout decisions. kiln-assign-layouts records them
// in the IR as tile encodings (`!tile.tile<64x64xf32, #tile.mma<...>>`, `#tile.blocked`) with
// explicit tile.convert_layout ops, and kiln-lower-to-gpu follows them:
//  - a tile.dot is #tile.mma<...> when it runs on the tensor cores (mma.sync.m16n8k16:
//    bf16/f16 operands, shapes in whole fragments), else #tile.blocked;
//  - a loop's carried tile is #tile.mma<...> when the body yields a tensor-core accumulator
//    (through elementwise ops), else its initial value's layout.
#include "Dialect/Tile/TileDialect.h"

namespace kiln::portable {

/// The tensor-core layout for `d` with `warps` warps per CTA, or null when it does not fit.
tile::MmaLayoutAttr mmaLayoutFor(tile::DotOp d, int64_t warps);

/// The layout `v` takes once lowered, as far as the IR decides it: the mma layout of the
/// tensor-core dot it comes from through elementwise ops, else blocked.
mlir::Attribute predictLayout(mlir::Value v, int64_t warps);

/// Records the decisions as encodings on every tile of `kernel` that varies, with
/// tile.convert_layout where a value meets a user that wants another layout.
void assignLayouts(tile::KernelOp kernel, int64_t warps);

} // namespace kiln::portable
