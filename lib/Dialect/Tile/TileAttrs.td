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

    On a rank-1 tile it is the rows of that layout (Triton's slice of an mma layout along
    dim 1): a row reduction's result, a row broadcast's input. Lane l of warp w holds, for
    each of its frags[0] fragments i, rows 16 (frags[0] (w / warps[1]) + i) + l / 4 and 8
    below it: every row of the warp's accumulator, copied on the 4 lanes of a quad and on
    the warps[1] warps along N, so broadcasting it over the accumulator, or folding a row
    into it, never leaves the thread.
  }];
  let parameters = (ins "int64_t":$warpsM, "int64_t":$warpsN, "int64_t":$fragsM, "int64_t":$fragsN);
  let assemblyFormat = "`<` `warps` `=` `[` $warpsM `,` $warpsN `]` `,` `frags` `=` `[` $fragsM `,` $fragsN `]` `>`";
}

// The sm_90a twins' layouts. The twin is emitted straight to NVVM (no tile values), so these
// describe its buffers and registers: its gpu.func records them (`kiln.layouts`), and the
// emitter derives the wgmma descriptors and the staging addresses from them.

def Tile_WgmmaLayoutAttr : Tile_Attr<"WgmmaLayout", "wgmma"> {
  let summary = "the accumulator fragments of wgmma.mma_async m64nNk16, per warpgroup";
  let description = [{
    `#tile.wgmma<m = 64, n = 256>`: thread t of the warpgroup (warp w = t / 32, lane l) holds
    f32 element 4j + 2h + e at row 16w + l/4 + 8h, column 8j + 2(l % 4) + e, for j < n / 8.
  }];
  let parameters = (ins "int64_t":$m, "int64_t":$n);
  let assemblyFormat = "`<` `m` `=` $m `,` `n` `=` $n `>`";
}

def Tile_NvmmaSharedLayoutAttr : Tile_Attr<"NvmmaSharedLayout", "nvmma_shared"> {
  let summary = "a tile in shared memory as TMA writes it and wgmma reads it: swizzled rows";
  let description = [{
    `#tile.nvmma_shared<swizzle = 128, major = "k">`: rows of `swizzle` bytes, the 16-byte
    chunk c of row r stored at chunk c ^ (r % (swizzle / 16)); 8 rows make a 1024-byte atom.
    `major` names the contiguous dim: "k" (A, K-major) or "mn" (B and C, rows along N, in
    boxes of swizzle / element-size columns).
  }];
  let parameters = (ins "int64_t":$swizzle, StringRefParameter<>:$major);
  let assemblyFormat = "`<` `swizzle` `=` $swizzle `,` `major` `=` $major `>`";
  let extraClassDeclaration = [{
    /// How many rows the XOR pattern spans (8 for 128-byte rows).
    int64_t period() const { return getSwizzle() / 16; }
    /// The wgmma shared-memory descriptor's fixed bits (all but the start address) for a
    /// tile in this layout whose column boxes are `boxBytes` apart: leading byte offset
    /// (the box stride when MN-major, 16 when K-major), stride byte offset (one atom, 8 rows),
    /// swizzle mode (1 = 128B).
    int64_t descriptorBits(int64_t boxBytes) const {
      int64_t lbo = getMajor() == "k" ? 16 : boxBytes, sbo = 8 * getSwizzle();
      uint64_t mode = getSwizzle() == 128 ? 1 : getSwizzle() == 64 ? 2 : getSwizzle() == 32 ? 3 : 0;
      return int64_t((uint64_t(lbo >> 4) << 16) | (uint64_t(sbo >> 4) << 32) | (mode << 62));
    }
  }];
}

#endif // KILN_TILE_ATTRS
