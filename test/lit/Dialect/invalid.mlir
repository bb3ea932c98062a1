// RUN: kiln-opt %s -split-input-file -verify-diagnostics
// One case per diagnostic of the tile dialect: the type verifiers (TileDialect.cpp),
// the op verifiers and custom parsers (TileOps.cpp), and a few ODS-generated checks.

//===----------------------------------------------------------------------===//
// Types: !tile.tile, !tile.view, !tile.tensor
//===----------------------------------------------------------------------===//

// expected-error @+1 {{tile element type must be f32, f16 or bf16, got 'i32'}}
func.func private @tile_i32(!tile.tile<4x4xi32>)

// -----

// expected-error @+1 {{tile rank must be 1, 2 or 3, got 0}}
func.func private @tile_rank0(!tile.tile<f32>)

// -----

// expected-error @+1 {{tile rank must be 1, 2 or 3, got 4}}
func.func private @tile_rank4(!tile.tile<2x2x2x2xf32>)

// -----

// expected-error @+1 {{tile dims must be positive, got 0}}
func.func private @tile_zero_dim(!tile.tile<4x0xf32>)

// -----

// expected-error @+1 {{tile encoding must be #tile.blocked or #tile.mma<...>, got 42 : i64}}
func.func private @tile_bad_encoding(!tile.tile<4x4xf32, 42>)

// -----

// A rank-1 tile in an mma layout holds that layout's rows: 4 warps x 1 fragment x 16 = 64.
// expected-error @+1 {{a rank-1 tile in #tile.mma<warps = [4, 1], frags = [1, 8]> holds its 64 rows, not 32}}
func.func private @tile_rows_length(!tile.tile<32xf32, #tile.mma<warps = [4, 1], frags = [1, 8]>>)

// -----

// expected-error @+1 {{an mma encoding is for rank 1 or 2 tiles, not rank 3}}
func.func private @tile_mma_rank3(!tile.tile<2x64x64xf32, #tile.mma<warps = [4, 1], frags = [1, 8]>>)

// -----

tile.kernel @convert_changes_shape(in %X : !tile.tensor<[N], f32>, out %Y : !tile.tensor<[N], f32>) {
  %t = tile.full 1.0 : !tile.tile<4xf32>
  // expected-error @+1 {{'tile.convert_layout' op changes more than the encoding}}
  %u = tile.convert_layout %t : !tile.tile<4xf32> to !tile.tile<8xf32, #tile.blocked>
}

// -----

// A negative or dynamic extent never reaches the verifier: the shape parser refuses it.
// expected-error @+1 {{expected static shape}}
func.func private @tile_dynamic_dim(!tile.tile<?x4xf32>)

// -----

// expected-error @+1 {{view element type must be f32, f16 or bf16, got 'f64'}}
func.func private @view_f64(!tile.view<8xf64>)

// -----

// expected-error @+1 {{view rank must be 1, 2 or 3, got 4}}
func.func private @view_rank4(!tile.view<1x2x3x4xbf16>)

// -----

// expected-error @+1 {{view rank must be 1, 2 or 3, got 0}}
func.func private @view_rank0(!tile.view<bf16>)

// -----

// expected-error @+1 {{view dims must be positive, got 0}}
func.func private @view_zero_dim(!tile.view<0xf16>)

// -----

// expected-error @+1 {{tensor must have rank >= 1}}
tile.kernel @tensor_rank0(in %A : !tile.tensor<[], f32>, out %B : !tile.tensor<[M], f32>) {
}

// -----

// expected-error @+1 {{tensor dim must be >= 0, got -3}}
tile.kernel @tensor_negative_dim(in %A : !tile.tensor<[M, -3], f32>, out %B : !tile.tensor<[M], f32>) {
}

// -----

// expected-error @+1 {{tensor element type must be f32, f16, bf16 or i32, got 'i8'}}
tile.kernel @tensor_i8(in %A : !tile.tensor<[M], i8>, out %B : !tile.tensor<[M], f32>) {
}

// -----

// tile.read: element indices, one per dim, of an i32 input.
tile.kernel @read_wrong_rank(in %L : !tile.tensor<[B, 2], i32>, out %Y : !tile.tensor<[B], f32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'tile.read' op needs 2 element indices for a rank-2 tensor, got 1}}
  %n = tile.read %L[%c0] : !tile.tensor<[B, 2], i32>
}

// -----

tile.kernel @read_float(in %X : !tile.tensor<[B], f32>, out %Y : !tile.tensor<[B], f32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'tile.read' op reads i32 tensors only, got 'f32'; load a float tensor into a tile}}
  %n = tile.read %X[%c0] : !tile.tensor<[B], f32>
}

// -----

tile.kernel @read_output(in %X : !tile.tensor<[B], f32>, out %L : !tile.tensor<[B], i32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'tile.read' op reads an input only, not an output}}
  %n = tile.read %L[%c0] : !tile.tensor<[B], i32>
}

// -----

// tile.view's window: along a dim the tile spans, never the innermost.
tile.kernel @window_innermost(in %X : !tile.tensor<[T, 32], f32>, out %Y : !tile.tensor<[T], f32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'tile.view' op windows dim 1, but a window must be along a dim the view's tile spans, not the innermost: dim 0 here}}
  %v = tile.view %X[%c0, %c0] window(%c0, %c0) along 1 : !tile.tensor<[T, 32], f32> -> !tile.view<16x32xf32>
}

// -----

tile.kernel @window_fixed_dim(in %X : !tile.tensor<[H, T, 32], f32>, out %Y : !tile.tensor<[T], f32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'tile.view' op windows dim 0, but a window must be along a dim the view's tile spans, not the innermost: dim 1 here}}
  %v = tile.view %X[%c0, %c0, %c0] window(%c0, %c0) along 0 : !tile.tensor<[H, T, 32], f32> -> !tile.view<16x32xf32>
}

// -----

tile.kernel @window_rank1_tile(in %X : !tile.tensor<[H, T, 32], f32>, out %Y : !tile.tensor<[T], f32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'tile.view' op windows dim 1, but a window must be along a dim the view's tile spans, not the innermost: this view's tile spans the innermost dim only}}
  %v = tile.view %X[%c0, %c0, %c0] window(%c0, %c0) along 1 : !tile.tensor<[H, T, 32], f32> -> !tile.view<32xf32>
}

// -----

// A dim is a bare symbol name or an integer; a string is not accepted.
// expected-error @+1 {{expected valid keyword}}
func.func private @tensor_string_dim(!tile.tensor<["M"], f32>)

//===----------------------------------------------------------------------===//
// tile.kernel
//===----------------------------------------------------------------------===//

// -----

// expected-error @+1 {{'tile.kernel' op argument 'A' must be a !tile.tensor, got '!tile.tile<4xf32>'}}
tile.kernel @arg_not_tensor(in %A : !tile.tile<4xf32>, out %B : !tile.tensor<[M], f32>) {
}

// -----

// expected-error @+1 {{'tile.kernel' op argument 'n' must be a !tile.tensor, got 'index'}}
tile.kernel @arg_index(in %n : index, out %B : !tile.tensor<[M], f32>) {
}

// -----

// expected-error @+1 {{'tile.kernel' op has no 'out' argument: a kernel must write something}}
tile.kernel @no_out(in %A : !tile.tensor<[M], f32>, in %B : !tile.tensor<[M], f32>) {
}

// -----

// expected-error @+1 {{'tile.kernel' op has no 'out' argument: a kernel must write something}}
tile.kernel @no_args() {
}

// -----

// expected-error @+1 {{expected 'in' or 'out' before argument}}
tile.kernel @bad_role(inout %A : !tile.tensor<[M], f32>) {
}

// -----

// The role keyword is required.
// expected-error @+1 {{expected valid keyword}}
tile.kernel @missing_role(%A : !tile.tensor<[M], f32>) {
}

// -----

// Argument names are the SSA names, so in the custom form a repeated name is already a
// parse error; the verifier's check is reached through the generic form below.
// expected-note @+1 {{previously referenced here}}
tile.kernel @dup_ssa(in %A : !tile.tensor<[M], f32>,
                     // expected-error @+1 {{region entry argument '%A' is already in use}}
                     out %A : !tile.tensor<[M], f32>) {
}

// -----

// expected-error @+1 {{'tile.kernel' op argument name 'A' is used twice}}
"tile.kernel"() <{arg_names = ["A", "A"], outputs = array<i1: false, true>, sym_name = "dup_name"}> ({
^bb0(%a: !tile.tensor<[M], f32>, %b: !tile.tensor<[M], f32>):
  "tile.return"() : () -> ()
}) : () -> ()

// -----

// expected-error @+1 {{'tile.kernel' op needs one name and one in/out role per argument}}
"tile.kernel"() <{arg_names = ["A"], outputs = array<i1: false, true>, sym_name = "few_names"}> ({
^bb0(%a: !tile.tensor<[M], f32>, %b: !tile.tensor<[M], f32>):
  "tile.return"() : () -> ()
}) : () -> ()

// -----

// expected-error @+1 {{'tile.kernel' op needs one name and one in/out role per argument}}
"tile.kernel"() <{arg_names = ["A", "B"], outputs = array<i1: true>, sym_name = "few_roles"}> ({
^bb0(%a: !tile.tensor<[M], f32>, %b: !tile.tensor<[M], f32>):
  "tile.return"() : () -> ()
}) : () -> ()

//===----------------------------------------------------------------------===//
// tile.dim
//===----------------------------------------------------------------------===//

// -----

tile.kernel @unknown_symbol(in %A : !tile.tensor<[M, 64], f32>, out %B : !tile.tensor<[M, 64], f32>) {
  // expected-error @+1 {{'tile.dim' op symbol 'N' is not a dim of any argument of @unknown_symbol}}
  %n = tile.dim "N"
}

// -----

// A constant dim is not a symbol.
tile.kernel @constant_is_not_symbol(in %A : !tile.tensor<[M, 64], f32>, out %B : !tile.tensor<[M, 64], f32>) {
  // expected-error @+1 {{'tile.dim' op symbol '64' is not a dim of any argument of @constant_is_not_symbol}}
  %n = tile.dim "64"
}

// -----

// expected-error @+1 {{'tile.dim' op must be inside a tile.kernel}}
%m = tile.dim "M"

//===----------------------------------------------------------------------===//
// tile.grid
//===----------------------------------------------------------------------===//

// -----

tile.kernel @grid4(in %A : !tile.tensor<[M], f32>, out %B : !tile.tensor<[M], f32>) {
  %m = tile.dim "M"
  // expected-error @+1 {{'tile.grid' op grid must have 1, 2 or 3 dims, got 4}}
  tile.grid (%i, %j, %k, %l) in (%m, %m, %m, %m) {
  }
}

// -----

tile.kernel @grid0(in %A : !tile.tensor<[M], f32>, out %B : !tile.tensor<[M], f32>) {
  // expected-error @+1 {{'tile.grid' op grid must have 1, 2 or 3 dims, got 0}}
  tile.grid () in () {
  }
}

// -----

tile.kernel @grid_iv_mismatch(in %A : !tile.tensor<[M], f32>, out %B : !tile.tensor<[M], f32>) {
  %m = tile.dim "M"
  // expected-error @+1 {{grid has 2 indices but 1 sizes}}
  tile.grid (%i, %j) in (%m) {
  }
}

// -----

tile.kernel @grid_body_args(in %A : !tile.tensor<[M], f32>, out %B : !tile.tensor<[M], f32>) {
  %m = tile.dim "M"
  // expected-error @+1 {{'tile.grid' op body must take one index per grid dim}}
  "tile.grid"(%m, %m) ({
  ^bb0(%i: index):
    "tile.yield"() : () -> ()
  }) : (index, index) -> ()
}

// -----

func.func @grid_outside_kernel(%n: index) {
  // expected-error @+1 {{'tile.grid' op expects parent op 'tile.kernel'}}
  tile.grid (%i) in (%n) {
  }
  return
}

//===----------------------------------------------------------------------===//
// tile.loop, tile.yield
//===----------------------------------------------------------------------===//

// -----

tile.kernel @loop_yield_count(in %A : !tile.tensor<[M], f32>, out %B : !tile.tensor<[M], f32>) {
  %m = tile.dim "M"
  tile.grid (%i) in (%m) {
    %z = tile.full 0.0 : !tile.tile<4xf32>
    // A carried value with no explicit yield: the implicit one yields nothing.
    // expected-error @+1 {{'tile.loop' op carries 1 values but its body yields 0}}
    %r = tile.loop %k to %m carry(%c = %z : !tile.tile<4xf32>) {
    }
  }
}

// -----

tile.kernel @loop_yield_too_many(in %A : !tile.tensor<[M], f32>, out %B : !tile.tensor<[M], f32>) {
  %m = tile.dim "M"
  tile.grid (%i) in (%m) {
    %z = tile.full 0.0 : !tile.tile<4xf32>
    // expected-error @+1 {{'tile.loop' op carries 1 values but its body yields 2}}
    %r = tile.loop %k to %m carry(%c = %z : !tile.tile<4xf32>) {
      tile.yield %c, %c : !tile.tile<4xf32>, !tile.tile<4xf32>
    }
  }
}

// -----

tile.kernel @loop_yield_type(in %A : !tile.tensor<[M], f32>, out %B : !tile.tensor<[M], f32>) {
  %m = tile.dim "M"
  tile.grid (%i) in (%m) {
    %z = tile.full 0.0 : !tile.tile<4xf32>
    // expected-error @+1 {{'tile.loop' op carried value #0 is '!tile.tile<4xf32>' but the body yields '!tile.tile<4xf16>'}}
    %r = tile.loop %k to %m carry(%c = %z : !tile.tile<4xf32>) {
      %h = tile.cast %c : !tile.tile<4xf32> -> !tile.tile<4xf16>
      tile.yield %h : !tile.tile<4xf16>
    }
  }
}

// -----

tile.kernel @loop_stages0(in %A : !tile.tensor<[M], f32>, out %B : !tile.tensor<[M], f32>) {
  %m = tile.dim "M"
  tile.grid (%i) in (%m) {
    // expected-error @+1 {{'tile.loop' op attribute 'stages' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 1}}
    tile.loop %k to %m stages 0 {
    }
  }
}

// -----

tile.kernel @yield_in_kernel(in %A : !tile.tensor<[M], f32>, out %B : !tile.tensor<[M], f32>) {
  // expected-error @+1 {{'tile.yield' op expects parent op to be one of 'tile.grid, tile.loop'}}
  tile.yield
}

//===----------------------------------------------------------------------===//
// tile.view, tile.load, tile.store
//===----------------------------------------------------------------------===//

// -----

tile.kernel @view_index_count(in %A : !tile.tensor<[M, K], f32>, out %B : !tile.tensor<[M], f32>) {
  %m = tile.dim "M"
  tile.grid (%i) in (%m) {
    // expected-error @+1 {{'tile.view' op needs 2 tile indices for a rank-2 tensor, got 1}}
    %v = tile.view %A[%i] : !tile.tensor<[M, K], f32> -> !tile.view<16x16xf32>
  }
}

// -----

tile.kernel @view_rank(in %A : !tile.tensor<[M], f32>, out %B : !tile.tensor<[M], f32>) {
  %m = tile.dim "M"
  tile.grid (%i) in (%m) {
    // expected-error @+1 {{'tile.view' op view rank 2 is more than the tensor's rank 1}}
    %v = tile.view %A[%i] : !tile.tensor<[M], f32> -> !tile.view<16x16xf32>
  }
}

// -----

tile.kernel @view_element_type(in %A : !tile.tensor<[M, K], f32>, out %B : !tile.tensor<[M], f32>) {
  %m = tile.dim "M"
  tile.grid (%i) in (%m) {
    // expected-error @+1 {{'tile.view' op view element type 'bf16' does not match tensor element type 'f32'}}
    %v = tile.view %A[%i, %i] : !tile.tensor<[M, K], f32> -> !tile.view<16x16xbf16>
  }
}

// -----

tile.kernel @load_shape(in %A : !tile.tensor<[M, K], f32>, out %B : !tile.tensor<[M], f32>) {
  %m = tile.dim "M"
  tile.grid (%i) in (%m) {
    %v = tile.view %A[%i, %i] : !tile.tensor<[M, K], f32> -> !tile.view<8x16xf32>
    // expected-error @+1 {{'tile.load' op tile shape 16x8 does not match view shape 8x16}}
    %t = tile.load %v : !tile.view<8x16xf32> -> !tile.tile<16x8xf32>
  }
}

// -----

tile.kernel @load_element_type(in %A : !tile.tensor<[M, K], bf16>, out %B : !tile.tensor<[M], f32>) {
  %m = tile.dim "M"
  tile.grid (%i) in (%m) {
    %v = tile.view %A[%i, %i] : !tile.tensor<[M, K], bf16> -> !tile.view<8x16xbf16>
    // expected-error @+1 {{'tile.load' op loads 'bf16' elements into a 'f32' tile; load, then tile.cast}}
    %t = tile.load %v : !tile.view<8x16xbf16> -> !tile.tile<8x16xf32>
  }
}

// -----

tile.kernel @store_shape(in %A : !tile.tensor<[M], f32>, out %B : !tile.tensor<[M], f32>) {
  %m = tile.dim "M"
  tile.grid (%i) in (%m) {
    %v = tile.view %B[%i] : !tile.tensor<[M], f32> -> !tile.view<32xf32>
    %t = tile.full 1.0 : !tile.tile<16xf32>
    // expected-error @+1 {{'tile.store' op tile shape 16 does not match view shape 32}}
    tile.store %t, %v : !tile.tile<16xf32>, !tile.view<32xf32>
  }
}

// -----

tile.kernel @store_element_type(in %A : !tile.tensor<[M], f32>, out %B : !tile.tensor<[M], bf16>) {
  %m = tile.dim "M"
  tile.grid (%i) in (%m) {
    %v = tile.view %B[%i] : !tile.tensor<[M], bf16> -> !tile.view<32xbf16>
    %t = tile.full 1.0 : !tile.tile<32xf32>
    // expected-error @+1 {{'tile.store' op stores a 'f32' tile into a 'bf16' view; tile.cast it first}}
    tile.store %t, %v : !tile.tile<32xf32>, !tile.view<32xbf16>
  }
}

//===----------------------------------------------------------------------===//
// tile.dot
//===----------------------------------------------------------------------===//

// -----

func.func @dot_rank(%a: !tile.tile<16xf32>, %b: !tile.tile<16x8xf32>, %c: !tile.tile<16x8xf32>) {
  // expected-error @+1 {{'tile.dot' op operands must be rank-2 tiles}}
  %d = tile.dot %a, %b, %c : !tile.tile<16xf32>, !tile.tile<16x8xf32> -> !tile.tile<16x8xf32>
  return
}

// -----

func.func @dot_rank3_acc(%a: !tile.tile<4x16xf32>, %b: !tile.tile<16x8xf32>, %c: !tile.tile<1x4x8xf32>) {
  // expected-error @+1 {{'tile.dot' op operands must be rank-2 tiles}}
  %d = tile.dot %a, %b, %c : !tile.tile<4x16xf32>, !tile.tile<16x8xf32> -> !tile.tile<1x4x8xf32>
  return
}

// -----

func.func @dot_k(%a: !tile.tile<4x16xbf16>, %b: !tile.tile<32x8xbf16>, %c: !tile.tile<4x8xf32>) {
  // expected-error @+1 {{'tile.dot' op K of lhs (16) does not match K of rhs (32)}}
  %d = tile.dot %a, %b, %c : !tile.tile<4x16xbf16>, !tile.tile<32x8xbf16> -> !tile.tile<4x8xf32>
  return
}

// -----

func.func @dot_acc_shape(%a: !tile.tile<4x16xbf16>, %b: !tile.tile<16x8xbf16>, %c: !tile.tile<8x4xf32>) {
  // expected-error @+1 {{'tile.dot' op accumulator is 8x4 but lhs @ rhs is 4x8}}
  %d = tile.dot %a, %b, %c : !tile.tile<4x16xbf16>, !tile.tile<16x8xbf16> -> !tile.tile<8x4xf32>
  return
}

// -----

func.func @dot_mixed_inputs(%a: !tile.tile<4x16xbf16>, %b: !tile.tile<16x8xf16>, %c: !tile.tile<4x8xf32>) {
  // expected-error @+1 {{'tile.dot' op lhs is 'bf16' but rhs is 'f16'}}
  %d = tile.dot %a, %b, %c : !tile.tile<4x16xbf16>, !tile.tile<16x8xf16> -> !tile.tile<4x8xf32>
  return
}

// -----

func.func @dot_acc_f16(%a: !tile.tile<4x16xf16>, %b: !tile.tile<16x8xf16>, %c: !tile.tile<4x8xf16>) {
  // expected-error @+1 {{'tile.dot' op accumulator must be f32}}
  %d = tile.dot %a, %b, %c : !tile.tile<4x16xf16>, !tile.tile<16x8xf16> -> !tile.tile<4x8xf16>
  return
}

// -----

func.func @dot_result_type(%a: !tile.tile<4x16xf16>, %b: !tile.tile<16x8xf16>, %c: !tile.tile<4x8xf32>) {
  // expected-error @+1 {{'tile.dot' op failed to verify that all of {acc, result} have same type}}
  %d = "tile.dot"(%a, %b, %c) : (!tile.tile<4x16xf16>, !tile.tile<16x8xf16>, !tile.tile<4x8xf32>) -> !tile.tile<4x8xf16>
  return
}

//===----------------------------------------------------------------------===//
// tile.cast, tile.broadcast
//===----------------------------------------------------------------------===//

// -----

func.func @cast_shape(%a: !tile.tile<4x8xf32>) {
  // expected-error @+1 {{'tile.cast' op changes the shape from 4x8 to 8x4}}
  %b = tile.cast %a : !tile.tile<4x8xf32> -> !tile.tile<8x4xbf16>
  return
}

// -----

func.func @broadcast_dims_count(%a: !tile.tile<8xf32>) {
  // expected-error @+1 {{'tile.broadcast' op needs one target dim per input dim}}
  %b = tile.broadcast %a [0, 1] : !tile.tile<8xf32> -> !tile.tile<8x8xf32>
  return
}

// -----

func.func @broadcast_element_type(%a: !tile.tile<8xf32>) {
  // expected-error @+1 {{'tile.broadcast' op changes the element type; use tile.cast}}
  %b = tile.broadcast %a [1] : !tile.tile<8xf32> -> !tile.tile<4x8xbf16>
  return
}

// -----

func.func @broadcast_order(%a: !tile.tile<4x8xf32>) {
  // expected-error @+1 {{'tile.broadcast' op target dims must be increasing and < result rank}}
  %b = tile.broadcast %a [2, 0] : !tile.tile<4x8xf32> -> !tile.tile<8x2x4xf32>
  return
}

// -----

func.func @broadcast_repeated_dim(%a: !tile.tile<4x4xf32>) {
  // expected-error @+1 {{'tile.broadcast' op target dims must be increasing and < result rank}}
  %b = tile.broadcast %a [1, 1] : !tile.tile<4x4xf32> -> !tile.tile<2x4x4xf32>
  return
}

// -----

func.func @broadcast_dim_out_of_range(%a: !tile.tile<8xf32>) {
  // expected-error @+1 {{'tile.broadcast' op target dims must be increasing and < result rank}}
  %b = tile.broadcast %a [2] : !tile.tile<8xf32> -> !tile.tile<4x8xf32>
  return
}

// -----

func.func @broadcast_size(%a: !tile.tile<8xf32>) {
  // expected-error @+1 {{'tile.broadcast' op input dim 0 (8) does not match result dim 1 (16)}}
  %b = tile.broadcast %a [1] : !tile.tile<8xf32> -> !tile.tile<4x16xf32>
  return
}

//===----------------------------------------------------------------------===//
// tile.reduce_sum, tile.reduce_max
//===----------------------------------------------------------------------===//

// -----

func.func @reduce_rank1(%a: !tile.tile<8xf32>) {
  // expected-error @+1 {{'tile.reduce_sum' op input must have rank >= 2}}
  %b = tile.reduce_sum %a dim 0 : !tile.tile<8xf32> -> !tile.tile<1xf32>
  return
}

// -----

func.func @reduce_dim_too_big(%a: !tile.tile<4x8xf32>) {
  // expected-error @+1 {{'tile.reduce_max' op dim 2 is out of range for a rank-2 tile}}
  %b = tile.reduce_max %a dim 2 : !tile.tile<4x8xf32> -> !tile.tile<4xf32>
  return
}

// -----

func.func @reduce_dim_negative(%a: !tile.tile<4x8xf32>) {
  // expected-error @+1 {{'tile.reduce_sum' op dim -1 is out of range for a rank-2 tile}}
  %b = tile.reduce_sum %a dim -1 : !tile.tile<4x8xf32> -> !tile.tile<4xf32>
  return
}

// -----

func.func @reduce_result_shape(%a: !tile.tile<4x8xf32>) {
  // expected-error @+1 {{'tile.reduce_sum' op result shape must be 4, got 8}}
  %b = tile.reduce_sum %a dim 1 : !tile.tile<4x8xf32> -> !tile.tile<8xf32>
  return
}

// -----

func.func @reduce_result_rank(%a: !tile.tile<2x4x8xf32>) {
  // expected-error @+1 {{'tile.reduce_max' op result shape must be 2x8, got 2x4x8}}
  %b = tile.reduce_max %a dim 1 : !tile.tile<2x4x8xf32> -> !tile.tile<2x4x8xf32>
  return
}

// -----

func.func @reduce_element_type(%a: !tile.tile<4x8xbf16>) {
  // expected-error @+1 {{'tile.reduce_max' op changes the element type; use tile.cast}}
  %b = tile.reduce_max %a dim 0 : !tile.tile<4x8xbf16> -> !tile.tile<8xf32>
  return
}

//===----------------------------------------------------------------------===//
// Elementwise ops and scalars (ODS-generated checks)
//===----------------------------------------------------------------------===//

// -----

func.func @binary_mismatch(%a: !tile.tile<4xf32>, %b: !tile.tile<8xf32>) {
  // expected-error @+1 {{'tile.add' op requires the same type for all operands and results}}
  %c = "tile.add"(%a, %b) : (!tile.tile<4xf32>, !tile.tile<8xf32>) -> !tile.tile<4xf32>
  return
}

// -----

func.func @binary_dtype_mismatch(%a: !tile.tile<4xf32>, %b: !tile.tile<4xbf16>) {
  // expected-error @+1 {{'tile.max' op requires the same type for all operands and results}}
  %c = "tile.max"(%a, %b) : (!tile.tile<4xf32>, !tile.tile<4xbf16>) -> !tile.tile<4xf32>
  return
}

// -----

func.func @unary_result_mismatch(%a: !tile.tile<4xf32>) {
  // expected-error @+1 {{'tile.exp' op requires the same type for all operands and results}}
  %c = "tile.exp"(%a) : (!tile.tile<4xf32>) -> !tile.tile<4xf16>
  return
}

// -----

func.func @elementwise_on_view(%a: !tile.view<4xf32>) {
  // expected-error @+1 {{'tile.neg' op operand #0 must be tile, but got '!tile.view<4xf32>'}}
  %c = "tile.neg"(%a) : (!tile.view<4xf32>) -> !tile.view<4xf32>
  return
}

// -----

func.func @splat_i32(%x: i32) {
  // expected-error @+1 {{'tile.splat' op operand #0 must be index or 32-bit float, but got 'i32'}}
  %t = tile.splat %x : i32 -> !tile.tile<4xf32>
  return
}

// -----

tile.kernel @index_carry(in %X : !tile.tensor<[N], f32>, out %Y : !tile.tensor<[N], f32>) {
  %n = tile.dim "N"
  tile.grid (%i) in (%n) {
    // expected-error @+1 {{'tile.loop' op operand #1 must be variadic of tile, but got 'index'}}
    %r = tile.loop %k to %n carry(%c = %i : index) {
      tile.yield %c : index
    }
  }
}

// -----

tile.kernel @grid_yields(in %X : !tile.tensor<[N], f32>, out %Y : !tile.tensor<[N], f32>) {
  %n = tile.dim "N"
  // expected-error @+1 {{'tile.grid' op body yields values; a grid body returns nothing}}
  tile.grid (%i) in (%n) {
    tile.yield %i : index
  }
}

// -----

tile.kernel @empty_dim(in %X : !tile.tensor<[N, 4], f32>, out %Y : !tile.tensor<[N, 4], f32>) {
  // expected-error @+1 {{'tile.dim' op needs a symbol name}}
  %e = tile.dim ""
}

// -----

// expected-error @+1 {{argument name '0' must start with a letter or '_'}}
tile.kernel @numeric_name(in %0 : !tile.tensor<[N], f32>, out %Y : !tile.tensor<[N], f32>) {
}

// -----

tile.kernel @store_to_input(in %X : !tile.tensor<[N], f32>, out %Y : !tile.tensor<[N], f32>) {
  %n = tile.dim "N"
  tile.grid (%i) in (%n) {
    %v = tile.view %X[%i] : !tile.tensor<[N], f32> -> !tile.view<4xf32>
    %t = tile.full 1.0 : !tile.tile<4xf32>
    // expected-error @+1 {{'tile.store' op writes to argument 'X', which is an 'in' argument}}
    tile.store %t, %v : !tile.tile<4xf32>, !tile.view<4xf32>
  }
}

// -----

tile.kernel @loop_body_args(in %X : !tile.tensor<[N], f32>, out %Y : !tile.tensor<[N], f32>) {
  %n = tile.dim "N"
  tile.grid (%i) in (%n) {
    %z = tile.full 0.0 : !tile.tile<4xf32>
    // expected-error @+1 {{'tile.loop' op body argument #1 is '!tile.tile<4xf16>' but carried value #0 is '!tile.tile<4xf32>'}}
    %r = "tile.loop"(%n, %z) ({
    ^bb0(%k: index, %c: !tile.tile<4xf16>):
      "tile.yield"(%z) : (!tile.tile<4xf32>) -> ()
    }) {stages = 1 : i64} : (index, !tile.tile<4xf32>) -> !tile.tile<4xf32>
  }
}

// -----

tile.kernel @loop_no_iv(in %X : !tile.tensor<[N], f32>, out %Y : !tile.tensor<[N], f32>) {
  %n = tile.dim "N"
  tile.grid (%i) in (%n) {
    // expected-error @+1 {{'tile.loop' op body must take an index and one argument per carried value}}
    "tile.loop"(%n) ({
    ^bb0:
      "tile.yield"() : () -> ()
    }) {stages = 1 : i64} : (index) -> ()
  }
}

// -----

tile.kernel @store_outside_grid(in %X : !tile.tensor<[N], f32>, out %Y : !tile.tensor<[N], f32>) {
  %n = tile.dim "N"
  %c0 = arith.constant 0 : index
  %v = tile.view %Y[%c0] : !tile.tensor<[N], f32> -> !tile.view<4xf32>
  %t = tile.full 1.0 : !tile.tile<4xf32>
  // expected-error @+1 {{'tile.store' op is outside the tile.grid of a kernel that has one; move it into the grid}}
  tile.store %t, %v : !tile.tile<4xf32>, !tile.view<4xf32>
  tile.grid (%i) in (%n) {
  }
}

// -----

// expected-error @+1 {{tile of 2048x1024 elements exceeds kiln's limit of 1048576 (2^20) elements per tile}}
func.func private @tile_too_large(!tile.tile<2048x1024xf32>)

// -----

// expected-error @+1 {{view of 1099511627776x64 elements exceeds kiln's limit}}
func.func private @view_too_large(!tile.view<1099511627776x64xf32>)

// -----

// expected-error @+1 {{'tile.kernel' op in_place pairs an 'out' argument with an 'in' one; got 'X' and 'Y'}}
tile.kernel @in_place_backwards(in %X : !tile.tensor<[M, N], f32>, out %Y : !tile.tensor<[M, N], f32>) attributes {in_place = array<i64: 0, 1>} {
}

// -----

// expected-error @+1 {{'tile.kernel' op 'Y' can never be the same memory as 'X': their types differ}}
tile.kernel @in_place_other_type(in %X : !tile.tensor<[M, N], f16>, out %Y : !tile.tensor<[M, N], f32>) attributes {in_place = array<i64: 1, 0>} {
}

// -----

// expected-error @+1 {{'tile.kernel' op in_place needs (output, input) pairs of argument positions}}
tile.kernel @in_place_odd(in %X : !tile.tensor<[M, N], f32>, out %Y : !tile.tensor<[M, N], f32>) attributes {in_place = array<i64: 1>} {
}

// -----

// expected-error @+1 {{'tile.kernel' op in_place names argument #5 of 2}}
tile.kernel @in_place_out_of_range(in %X : !tile.tensor<[M, N], f32>, out %Y : !tile.tensor<[M, N], f32>) attributes {in_place = array<i64: 1, 5>} {
}

// -----

// expected-error @+1 {{'tile.kernel' op in_place lists 'Y' over 'X' twice}}
tile.kernel @in_place_twice(in %X : !tile.tensor<[M, N], f32>, out %Y : !tile.tensor<[M, N], f32>) attributes {in_place = array<i64: 1, 0, 1, 0>} {
}

//===----------------------------------------------------------------------===//
// tile.cmp, tile.iota, tile.transpose
//===----------------------------------------------------------------------===//

// -----

func.func @cmp_predicate(%a: !tile.tile<4x8xf32>) {
  // expected-error @+1 {{'tile.cmp' op predicate must be one of lt, le, gt, ge, eq, ne, got "lte"}}
  %b = tile.cmp "lte", %a, %a : !tile.tile<4x8xf32>
  return
}

// -----

func.func @iota_dim() {
  // expected-error @+1 {{'tile.iota' op dim 2 is out of range for a rank-2 tile}}
  %a = tile.iota dim 2 : !tile.tile<4x8xf32>
  return
}

// -----

func.func @iota_inexact() {
  // expected-error @+1 {{'tile.iota' op indexes up to 2049 along dim 1 are not exact in f16 (at most 2048)}}
  %a = tile.iota dim 1 : !tile.tile<2x2050xf16>
  return
}

// -----

func.func @transpose_rank(%a: !tile.tile<8xf32>) {
  // expected-error @+1 {{'tile.transpose' op needs a rank-2 tile, got rank 1}}
  %b = tile.transpose %a : !tile.tile<8xf32> -> !tile.tile<8xf32>
  return
}

// -----

func.func @transpose_shape(%a: !tile.tile<4x8xf32>) {
  // expected-error @+1 {{'tile.transpose' op result shape must be 8x4, got 4x8}}
  %b = tile.transpose %a : !tile.tile<4x8xf32> -> !tile.tile<4x8xf32>
  return
}
