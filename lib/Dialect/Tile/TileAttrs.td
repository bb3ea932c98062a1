#ifndef KILN_TILE_ATTRS
#define KILN_TILE_ATTRS

include "TileDialect.td"
include "mlir/IR/AttrTypeBase.td"

// Layouts: how a backend spreads a tile's elements over threads. The CUDA layout pass
// (kiln-assign-layouts) puts them on tile types as encodings
// (`!tile.tile<64x64xf32, #tile.blocked>`), with tile.convert_layout between them; the
// lowering then follows them. Nothing before that pass sees them.

class Tile_Attr<string name, string attrMnemonic> : AttrDef<Tile_Dialect, name> {
  let mnemonic = attrMnemonic;
}

def Tile_BlockedLayoutAttr : Tile_Attr<"BlockedLayout", "blocked"> {
  let summary = "thread t of T holds elements t, t+T, t+2T, ... of the row-major tile";
  let description = [{
    `#tile.blocked`: consecutive threads touch consecutive addresses, so loads and
    stores coalesce. The default layout of every tile that is not an mma accumulator.
  }];
}

def Tile_MmaLayoutAttr : Tile_Attr<"MmaLayout", "mma"> {
  let summary = "the accumulator fragments of mma.sync.m16n8k16 (sm_80 tensor cores)";
  let description = [{
    `#tile.mma<warps = [2, 2], frags = [2, 4]>`: the CTA's warps tile the result
    warps[0] x warps[1]; each warp holds frags[0] x frags[1] fragments of 16 x 8, four
    f32 per thread each.
  }];
  let parameters = (ins "int64_t":$warpsM, "int64_t":$warpsN, "int64_t":$fragsM, "int64_t":$fragsN);
  let assemblyFormat = "`<` `warps` `=` `[` $warpsM `,` $warpsN `]` `,` `frags` `=` `[` $fragsM `,` $fragsN `]` `>`";
}

#endif // KILN_TILE_ATTRS
