#ifndef KILN_TILE_OPS
#define KILN_TILE_OPS

include "TileTypes.td"
include "TileAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

//===----------------------------------------------------------------------===//
// Structure: kernel, symbolic dims, grid, loop
//===----------------------------------------------------------------------===//

def Tile_KernelOp : Tile_Op<"kernel", [
    Symbol, IsolatedFromAbove, SingleBlockImplicitTerminator<"ReturnOp">,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "a kernel: named tensor arguments, each an input or an output";
  let description = [{
    ```mlir
    tile.kernel @add(in %X : !tile.tensor<[M, N], f32>, in %Y : !tile.tensor<[M, N], f32>,
                     out %Z : !tile.tensor<[M, N], f32>) { ... }
    ```
    Argument names come from the SSA names and are kept in `arg_names`, so errors at
    launch can name the argument. An `out` argument is written by the kernel.

    `in_place` lists (output, input) argument positions, in pairs: the kernel promises that
    the output may be the very same memory as the input (each element of the input is
    read only by the program that writes that element of the output, before it writes it).
    A launch may pass one view as both only for a listed pair. The two must have the same
    type, and no `tile.dot` may read the input.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$arg_names,
                       DenseBoolArrayAttr:$outputs, OptionalAttr<DenseI64ArrayAttr>:$in_place);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    unsigned getNumArguments() { return getBody().front().getNumArguments(); }
    ::mlir::BlockArgument getArgument(unsigned i) { return getBody().front().getArgument(i); }
    TensorArgType getArgType(unsigned i) { return ::llvm::cast<TensorArgType>(getArgument(i).getType()); }
    ::llvm::StringRef getArgName(unsigned i) {
      return ::llvm::cast<::mlir::StringAttr>(getArgNames()[i]).getValue();
    }
    bool isOutput(unsigned i) { return getOutputs()[i]; }
    /// The first (argument, dim) that carries symbol `sym`, if any.
    std::optional<std::pair<unsigned, unsigned>> findSymbol(::llvm::StringRef sym);
  }];
}

def Tile_ReturnOp : Tile_Op<"return", [Pure, Terminator, HasParent<"KernelOp">, ReturnLike]> {
  let summary = "ends a kernel";
  let assemblyFormat = "attr-dict";
}

def Tile_DimOp : Tile_Op<"dim", [Pure,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "the runtime value of a symbolic dim (e.g. \"M\") of the kernel's tensors";
  let description = [{ `%M = tile.dim "M"` — bound at launch from the arguments. }];
  let arguments = (ins StrAttr:$symbol);
  let results = (outs Index:$result);
  let assemblyFormat = "$symbol attr-dict";
  let hasVerifier = 1;
}

def Tile_YieldOp : Tile_Op<"yield", [Pure, Terminator, ReturnLike,
                                     ParentOneOf<["GridOp", "LoopOp"]>]> {
  let summary = "ends a grid body, or yields a loop's carried values";
  let arguments = (ins Variadic<AnyType>:$values);
  let builders = [OpBuilder<(ins), [{ /* no values */ }]>];
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

def Tile_GridOp : Tile_Op<"grid", [SingleBlockImplicitTerminator<"YieldOp">,
                                   HasParent<"KernelOp">]> {
  let summary = "runs the body once per tile index of a 1-3 dimensional launch grid";
  let description = [{
    ```mlir
    tile.grid (%i, %j) in (%gm, %gn) { ... }
    ```
    Each body instance is independent: it may not assume any order between instances.
  }];
  let arguments = (ins Variadic<Index>:$sizes);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [OpBuilder<(ins "::mlir::ValueRange":$sizes)>];
}

def Tile_LoopOp : Tile_Op<"loop", [SingleBlockImplicitTerminator<"YieldOp">,
    RecursiveMemoryEffects]> {
  let summary = "a sequential loop over tile indices 0..count, carrying tiles, with a pipeline depth";
  let description = [{
    ```mlir
    %acc = tile.loop %kk to %nk stages 4 carry(%c = %zero : !tile.tile<128x128xf32>) {
      ...
      tile.yield %next : !tile.tile<128x128xf32>
    }
    ```
    `stages` is how many iterations' loads a backend may keep in flight (a GPU pipelines
    global->shared copies that deep); it never changes the result.
  }];
  let arguments = (ins Index:$count, Variadic<Tile_AnyTile>:$inits,
                       ConfinedAttr<I64Attr, [IntMinValue<1>]>:$stages);
  let results = (outs Variadic<Tile_AnyTile>:$results);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [OpBuilder<(ins "::mlir::Value":$count, "::mlir::ValueRange":$inits,
                                 "int64_t":$stages)>];
  let extraClassDeclaration = [{
    ::mlir::BlockArgument getInductionVar() { return getBody().front().getArgument(0); }
    ::mlir::Block::BlockArgListType getCarried() {
      return getBody().front().getArguments().drop_front();
    }
  }];
}

//===----------------------------------------------------------------------===//
// Memory: views, loads, stores
//===----------------------------------------------------------------------===//

def Tile_ViewOp : Tile_Op<"view", [Pure, AttrSizedOperandSegments]> {
  let summary = "the tile-sized window of a tensor at a tile index";
  let description = [{
    `%v = tile.view %A[%i, %k] : !tile.tensor<[M, K], bf16> -> !tile.view<128x64xbf16>`
    covers elements [%i*128, %i*128+128) x [%k*64, %k*64+64) of %A. A view of fewer dims
    than its tensor fixes the leading ones at element indices: `tile.view %Q[%b, %h, %i, %c0]
    : !tile.tensor<[B, H, S, 64], bf16> -> !tile.view<64x64xbf16>` covers rows
    [%i*64, %i*64+64) of Q[%b, %h] (nothing when %b or %h is past its dim).

    A window narrows one tiled dim (not the innermost) to elements [%start, %start + %len),
    clipped to the dim: `tile.view %Q[%h, %i, %c0] window(%start, %len) along 1` counts its
    tile indices along dim 1 from %start and masks loads and stores past %len (a sequence
    of a batch packed end to end, its offset and length read from an i32 input).
  }];
  let arguments = (ins Tile_AnyTensor:$tensor, Variadic<Index>:$indices,
                       Optional<Index>:$windowStart, Optional<Index>:$windowSize,
                       OptionalAttr<I64Attr>:$windowDim);
  let results = (outs Tile_AnyView:$result);
  let assemblyFormat = [{
    $tensor `[` $indices `]` (`window` `(` $windowStart^ `,` $windowSize `)` `along` $windowDim)? attr-dict
    `:` type($tensor) `->` type($result)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$tensor, "::mlir::ValueRange":$indices), [{
      build($_builder, $_state, result, tensor, indices, ::mlir::Value(), ::mlir::Value(), ::mlir::IntegerAttr());
    }]>
  ];
  let extraClassDeclaration = [{
    /// Whether the view narrows a dim to a window (windowStart, windowSize, windowDim).
    bool hasWindow() { return getWindowStart() != nullptr; }
  }];
  let hasVerifier = 1;
}

def Tile_ReadOp : Tile_Op<"read", [MemoryEffects<[MemRead]>]> {
  let summary = "one element of an i32 input tensor, as an index";
  let description = [{
    `%n = tile.read %Lens[%b] : !tile.tensor<[B], i32>` is element %b of Lens (element
    indices, one per dim): a per-sequence length or offset for the program's bounds and
    masks. An index past its dim reads 0. The tensor must be an input (a kernel never
    writes what it reads this way).
  }];
  let arguments = (ins Tile_AnyTensor:$tensor, Variadic<Index>:$indices);
  let results = (outs Index:$result);
  let assemblyFormat = "$tensor `[` $indices `]` attr-dict `:` type($tensor)";
  let hasVerifier = 1;
}

def Tile_LoadOp : Tile_Op<"load", [MemoryEffects<[MemRead]>]> {
  let summary = "reads a view into a tile; elements past the tensor's edge read `padding`";
  let arguments = (ins Tile_AnyView:$view, DefaultValuedAttr<F64Attr, "0.0">:$padding);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$view attr-dict `:` type($view) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_StoreOp : Tile_Op<"store", [MemoryEffects<[MemWrite]>]> {
  let summary = "writes a tile through a view; elements past the tensor's edge are skipped";
  let arguments = (ins Tile_AnyTile:$value, Tile_AnyView:$view);
  let assemblyFormat = "$value `,` $view attr-dict `:` type($value) `,` type($view)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Tile values
//===----------------------------------------------------------------------===//

def Tile_FullOp : Tile_Op<"full", [Pure]> {
  let summary = "a tile with every element equal to a constant";
  let arguments = (ins F64Attr:$value);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
}

def Tile_SplatOp : Tile_Op<"splat", [Pure]> {
  let summary = "a tile with every element equal to a runtime scalar (an index is converted)";
  let arguments = (ins AnyTypeOf<[Index, F32]>:$scalar);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$scalar attr-dict `:` type($scalar) `->` type($result)";
}

def Tile_DotOp : Tile_Op<"dot", [Pure, AllTypesMatch<["acc", "result"]>]> {
  let summary = "matrix multiply-accumulate: result = lhs @ rhs + acc, accumulated in f32";
  let arguments = (ins Tile_AnyTile:$lhs, Tile_AnyTile:$rhs, Tile_AnyTile:$acc);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$lhs `,` $rhs `,` $acc attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)";
  let hasVerifier = 1;
}

class Tile_BinaryOp<string mnemonic, string what>
    : Tile_Op<mnemonic, [Pure, Elementwise, SameOperandsAndResultType]> {
  let summary = "elementwise " # what;
  let arguments = (ins Tile_AnyTile:$lhs, Tile_AnyTile:$rhs);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}
def Tile_AddOp : Tile_BinaryOp<"add", "sum">;
def Tile_SubOp : Tile_BinaryOp<"sub", "difference">;
def Tile_MulOp : Tile_BinaryOp<"mul", "product">;
def Tile_DivOp : Tile_BinaryOp<"div", "quotient">;
def Tile_MaxOp : Tile_BinaryOp<"max", "maximum (NaN-propagating)">;
def Tile_MinOp : Tile_BinaryOp<"min", "minimum (NaN-propagating)">;

class Tile_UnaryOp<string mnemonic, string what>
    : Tile_Op<mnemonic, [Pure, Elementwise, SameOperandsAndResultType]> {
  let summary = what;
  let arguments = (ins Tile_AnyTile:$input);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}
def Tile_NegOp : Tile_UnaryOp<"neg", "elementwise -x">;
def Tile_ExpOp : Tile_UnaryOp<"exp", "elementwise e^x">;
def Tile_Exp2Op : Tile_UnaryOp<"exp2", "elementwise 2^x">;
def Tile_LogOp : Tile_UnaryOp<"log", "elementwise natural logarithm">;
def Tile_SqrtOp : Tile_UnaryOp<"sqrt", "elementwise square root">;
def Tile_RsqrtOp : Tile_UnaryOp<"rsqrt", "elementwise 1/sqrt(x)">;
def Tile_TanhOp : Tile_UnaryOp<"tanh", "elementwise hyperbolic tangent">;
def Tile_SigmoidOp : Tile_UnaryOp<"sigmoid", "elementwise 1/(1+e^-x)">;
// Composites: kiln-expand-composites rewrites them into the primitives above, so a
// backend only lowers primitives.
def Tile_ReluOp : Tile_UnaryOp<"relu", "elementwise max(x, 0); a composite">;
def Tile_GeluOp : Tile_UnaryOp<"gelu",
    "elementwise GELU, tanh approximation 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3))); a composite">;
def Tile_SiluOp : Tile_UnaryOp<"silu", "elementwise x*sigmoid(x); a composite">;

// Masks. kiln's tiles hold numbers: a comparison yields a mask of the same type, 1 where it
// holds and 0 where not, which tile.select consumes (and which `mask * x` can use directly).
def Tile_CmpOp : Tile_Op<"cmp", [Pure, Elementwise, SameOperandsAndResultType]> {
  let summary = "elementwise comparison: 1 where `lhs predicate rhs` holds, else 0 (a mask)";
  let description = [{
    `tile.cmp "le", %col, %row : !tile.tile<64x64xf32>`. Predicates: "lt", "le", "gt",
    "ge", "eq" (false when either side is NaN) and "ne" (true when either side is NaN), as
    C++'s operators on floats.
  }];
  let arguments = (ins StrAttr:$predicate, Tile_AnyTile:$lhs, Tile_AnyTile:$rhs);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$predicate `,` $lhs `,` $rhs attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tile_SelectOp : Tile_Op<"select", [Pure, Elementwise, SameOperandsAndResultType]> {
  let summary = "elementwise choice: `a` where `mask` is not 0 (NaN counts as not 0), else `b`";
  let arguments = (ins Tile_AnyTile:$mask, Tile_AnyTile:$a, Tile_AnyTile:$b);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$mask `,` $a `,` $b attr-dict `:` type($result)";
}

def Tile_IotaOp : Tile_Op<"iota", [Pure]> {
  let summary = "a tile whose every element is its own index along `dim`";
  let description = [{
    `tile.iota dim 1 : !tile.tile<64x128xf32>` holds j at (i, j). The extent along `dim` must
    be exact in the element type (f32: 2^24, f16: 2048, bf16: 256). A backend computes it from
    the coordinates each thread holds, in whatever layout its users want.
  }];
  let arguments = (ins I64Attr:$dim);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "`dim` $dim attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tile_TransposeOp : Tile_Op<"transpose", [Pure]> {
  let summary = "a rank-2 tile with its dims swapped: result(i, j) = input(j, i)";
  let arguments = (ins Tile_AnyTile:$input);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_ScaleOp : Tile_Op<"scale", [Pure, Elementwise, SameOperandsAndResultType]> {
  let summary = "elementwise multiplication by a constant";
  let arguments = (ins Tile_AnyTile:$input, F64Attr:$factor);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$input `,` $factor attr-dict `:` type($result)";
}

def Tile_CastOp : Tile_Op<"cast", [Pure, Elementwise]> {
  let summary = "converts the element type (round to nearest even); the shape is unchanged";
  let arguments = (ins Tile_AnyTile:$input);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Tile_ConvertLayoutOp : Tile_Op<"convert_layout", [Pure]> {
  let summary = "the same tile in another encoding (how its elements are spread over threads)";
  let description = [{
    Made by a backend's layout pass where a value meets an op that wants it in another
    layout: `tile.convert_layout %x : !tile.tile<64x64xf32, #tile.blocked> to
    !tile.tile<64x64xf32, #tile.mma<warps = [2, 2], frags = [2, 4]>>`. The CUDA lowering
    moves the elements through shared memory; converting a uniform tile (no encoding) costs
    nothing. Shape and element type are unchanged.
  }];
  let arguments = (ins Tile_AnyTile:$input);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

def Tile_BroadcastOp : Tile_Op<"broadcast", [Pure]> {
  let summary = "repeats a tile along new dims: input dim i becomes result dim dims[i]";
  let description = [{
    A bias row over a 64x128 tile: `tile.broadcast %b [1] : !tile.tile<128xf32> -> !tile.tile<64x128xf32>`.
    A per-row value: `tile.broadcast %m [0] : !tile.tile<64xf32> -> !tile.tile<64x128xf32>`.
  }];
  let arguments = (ins Tile_AnyTile:$input, DenseI64ArrayAttr:$dims);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$input $dims attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

class Tile_ReduceOp<string mnemonic, string what> : Tile_Op<mnemonic, [Pure]> {
  let summary = "reduces one dim by " # what # "; the result drops that dim";
  let arguments = (ins Tile_AnyTile:$input, I64Attr:$dim);
  let results = (outs Tile_AnyTile:$result);
  let assemblyFormat = "$input `dim` $dim attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}
def Tile_ReduceSumOp : Tile_ReduceOp<"reduce_sum", "sum">;
def Tile_ReduceMaxOp : Tile_ReduceOp<"reduce_max", "maximum">;

#endif // KILN_TILE_OPS
