#ifndef KILN_TILE_TYPES
#define KILN_TILE_TYPES

include "TileDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinTypeInterfaces.td"

class Tile_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Tile_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def Tile_TensorType : Tile_Type<"TensorArg", "tensor"> {
  let summary = "a kernel argument: a strided tensor whose dims are symbols or constants";
  let description = [{
    `!tile.tensor<[M, K], bf16>`: dim entries are symbol names (bound at launch from
    the arguments, which must agree) or integer constants. Strides are always runtime
    values. Example: `!tile.tensor<[M, 4096], f32>`.
  }];
  let parameters = (ins "::mlir::ArrayAttr":$dims, "::mlir::Type":$elementType);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t getRank() const { return getDims().size(); }
    /// The symbol name of dim `i`, or empty when it is a constant.
    ::llvm::StringRef getDimSymbol(unsigned i) const;
    /// The constant extent of dim `i`, or -1 when it is a symbol.
    int64_t getDimConstant(unsigned i) const;
  }];
}

def Tile_ViewType : Tile_Type<"View", "view"> {
  let summary = "the tile-sized window of a tensor at one tile index";
  let description = [{
    `!tile.view<128x64xbf16>`: the shape is the tile's; the window may hang over the
    tensor's edge, and loads/stores through it are masked there.
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$shape, "::mlir::Type":$elementType);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{ int64_t getRank() const { return getShape().size(); } }];
}

def Tile_TileType : Tile_Type<"Tile", "tile"> {
  let summary = "a value-semantics tile of elements: a static shape, one element type";
  let description = [{
    `!tile.tile<128x128xf32>`, or rank 1 `!tile.tile<128xf32>`. Backends decide where a
    tile lives (registers, shared memory, a stack buffer).

    A backend's layout pass may give it an encoding, how its elements are spread over
    threads: `!tile.tile<64x64xf32, #tile.mma<warps = [2, 2], frags = [2, 4]>>`. Once the
    CUDA layout pass has run, every tile that varies has one, and a tile without one is
    uniform (a constant or a splat: it stands for every element in any layout); values
    change encoding only through `tile.convert_layout`.
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$shape, "::mlir::Type":$elementType,
                        OptionalParameter<"::mlir::Attribute">:$encoding);
  let builders = [
    TypeBuilder<(ins "::llvm::ArrayRef<int64_t>":$shape, "::mlir::Type":$elementType,
                     CArg<"::mlir::Attribute", "{}">:$encoding), [{
      return $_get($_ctxt, shape, elementType, encoding);
    }]>
  ];
  let skipDefaultBuilders = 1;
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t getRank() const { return getShape().size(); }
    int64_t getNumElements() const;
    /// The same tile with element type `t` (and the same encoding).
    TileType withElementType(::mlir::Type t) const { return get(getContext(), getShape(), t, getEncoding()); }
    /// The same tile with `encoding` (null: none).
    TileType withEncoding(::mlir::Attribute encoding) const {
      return get(getContext(), getShape(), getElementType(), encoding);
    }
  }];
}

def Tile_AnyTile : Type<CPred<"::llvm::isa<::kiln::tile::TileType>($_self)">, "tile", "::kiln::tile::TileType">;
def Tile_AnyView : Type<CPred<"::llvm::isa<::kiln::tile::ViewType>($_self)">, "tile view", "::kiln::tile::ViewType">;
def Tile_AnyTensor : Type<CPred<"::llvm::isa<::kiln::tile::TensorArgType>($_self)">, "tile tensor", "::kiln::tile::TensorArgType">;

#endif // KILN_TILE_TYPES
