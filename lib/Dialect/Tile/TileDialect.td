#ifndef KILN_TILE_DIALECT
#define KILN_TILE_DIALECT

include "mlir/IR/OpBase.td"

def Tile_Dialect : Dialect {
  let name = "tile";
  let summary = "kiln's tile-level IR: kernels over tensors with symbolic dims, computing on tiles";
  let description = [{
    A `tile.kernel` takes tensors whose dims are named symbols (M, N, K) or constants
    and whose strides are runtime values. A `tile.grid` launches one program per tile
    index; inside it, `tile.view` selects the tile of a tensor at a tile index,
    `tile.load`/`tile.store` move it (masked at ragged edges), and value-semantics ops
    compute on `!tile.tile<...>` values. Backends lower these ops; nothing here knows
    about a GPU or a CPU.
  }];
  let cppNamespace = "::kiln::tile";
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
}

class Tile_Op<string mnemonic, list<Trait> traits = []>
    : Op<Tile_Dialect, mnemonic, traits>;

#endif // KILN_TILE_DIALECT
