#pragma once
// The `tile` dialect: kiln's tile-level IR. Internal header (MLIR types); never
// included from include/kiln.
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "Dialect/Tile/TileDialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "Dialect/Tile/TileTypes.h.inc"

#define GET_ATTRDEF_CLASSES
#include "Dialect/Tile/TileAttrs.h.inc"

#define GET_OP_CLASSES
#include "Dialect/Tile/TileOps.h.inc"

namespace kiln::tile {
/// The most elements a tile (or view) type may have: kiln::dsl::kMaxTileElements.
inline constexpr int64_t kMaxTileElements = int64_t(1) << 20;
/// f32, f16 or bf16: the element types tiles and tensors may have.
bool isSupportedElementType(mlir::Type t);
} // namespace kiln::tile
