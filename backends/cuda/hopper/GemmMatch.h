#pragma once
// Internal: recognising a tile kernel that is one GEMM with an elementwise epilogue, so the
// sm_90a path can give it TMA loads, wgmma and warp specialisation. The DSL program is the
// one users write for every backend (catalogue::gemm*, or their own); nothing marks it.
//
// The shape recognised, in tile IR:
//
//   tile.grid (%i, %j) in (...) {
//     %acc0 = tile.full 0.0 : <BMxBNxf32>
//     %acc = tile.loop %kk to ceildiv(K, BK) carry(%c = %acc0) {
//       %a = tile.load (tile.view %A[%i, %kk])      // A: [M, K], bf16 or f16
//       %b = tile.load (tile.view %B[%kk, %j])      // B: [K, N], the same type
//       tile.yield (tile.dot %a, %b, %c)
//     }
//   or, two products sharing A's tile (a gated MLP's gate and up projections: `dual`),
//     %acc:2 = tile.loop ... carry(%c = %acc0, %d = %acc0) {
//       %a = ..., %b = tile.load (tile.view %B[%kk, %j]), %b2 = tile.load (tile.view %B2[%kk, %j])
//       tile.yield (tile.dot %a, %b, %c), (tile.dot %a, %b2, %d)
//     }
//   with an epilogue over both results.
//     ... elementwise ops, casts, broadcasts and loads of views at (%i, %j), (%i) or (%j) ...
//     tile.store %out, (tile.view %C[%i, %j])
//   }
//
// Anything else (another loop, a reduction, a splat of a runtime scalar, a view at other
// indices) is not matched, and the kernel keeps the portable lowering.
#include <string>

#include "Dialect/Tile/TileDialect.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

namespace kiln::hopper {

/// Which global axis of C a tile dim runs along.
enum class Axis { Row, Col };

struct GemmMatch {
  tile::KernelOp kernel;
  tile::GridOp grid;
  tile::LoopOp loop;
  tile::StoreOp store;
  unsigned a = 0, b = 0, c = 0; ///< kernel argument indices of A, B and C
  /// Two products: B2's argument index (the loop's second result is A @ B2).
  bool dual = false;
  unsigned b2 = 0;
  mlir::Type inElt;             ///< A's and B's element type (bf16 or f16)
  mlir::Value rowIv, colIv;     ///< the grid indices that pick C's tile row and column
  /// Every epilogue tile value, with the C axis each of its dims runs along.
  llvm::DenseMap<mlir::Value, llvm::SmallVector<Axis, 2>> axes;
  /// Kernel arguments the epilogue loads (bias, residual, ...), in first-use order.
  llvm::SmallVector<unsigned> epilogueInputs;
};

/// Whether the epilogue loads an input that varies along C's rows (a residual), not only
/// along its columns (a bias) or neither.
bool readsRowInputs(const GemmMatch& m);

/// Fills `out` when `kernel` has the shape above; otherwise returns false with `why` saying
/// which rule failed (shown by `kiln compile --emit=mlir` as a remark).
bool matchGemm(tile::KernelOp kernel, GemmMatch& out, std::string& why);

} // namespace kiln::hopper
