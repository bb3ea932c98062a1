// The layouts stage as `kiln compile --emit=layouts` prints it (a GEMM's sm_90a twin, whose
// epilogue stores vectors, beside the tile kernel with its layouts) reads back into
// kiln-opt, and the lowering goes on from the text: the stages can be taken apart and
// replayed one pass at a time.
// RUN: kiln-opt %s --kiln-lower-gemm-sm90="tile-n=128 tile-m=128" --kiln-assign-layouts > %t.layouts.mlir
// RUN: FileCheck %s --check-prefix=LAYOUTS < %t.layouts.mlir
// RUN: kiln-opt %t.layouts.mlir --kiln-lower-to-gpu | FileCheck %s

// LAYOUTS: gpu.func @mm__sm90(
// LAYOUTS: vector.from_elements
// CHECK: gpu.module
// CHECK: gpu.func @mm__sm90(
// CHECK: gpu.func @mm(
module {
  tile.kernel @mm(in %A: !tile.tensor<[M, K], bf16>, in %B: !tile.tensor<[K, N], bf16>, in %bias: !tile.tensor<[N], bf16>, out %C: !tile.tensor<[M, N], bf16>) {
    %M = tile.dim "M"
    %N = tile.dim "N"
    %K = tile.dim "K"
    %c64 = arith.constant 64 : index
    %c32 = arith.constant 32 : index
    %gm = arith.ceildivsi %M, %c64 : index
    %gn = arith.ceildivsi %N, %c64 : index
    tile.grid (%i, %j) in (%gm, %gn) {
      %kt = arith.ceildivsi %K, %c32 : index
      %z = tile.full 0.000000e+00 : <64x64xf32>
      %acc = tile.loop %kk to %kt stages 3 carry(%c = %z : !tile.tile<64x64xf32>) {
        %va = tile.view %A[%i, %kk] : <[M, K], bf16> -> <64x32xbf16>
        %a = tile.load %va : <64x32xbf16> -> <64x32xbf16>
        %vb = tile.view %B[%kk, %j] : <[K, N], bf16> -> <32x64xbf16>
        %b = tile.load %vb : <32x64xbf16> -> <32x64xbf16>
        %d = tile.dot %a, %b, %c : <64x32xbf16>, <32x64xbf16> -> <64x64xf32>
        tile.yield %d : !tile.tile<64x64xf32>
      }
      %vbias = tile.view %bias[%j] : <[N], bf16> -> <64xbf16>
      %lb = tile.load %vbias : <64xbf16> -> <64xbf16>
      %fb = tile.cast %lb : <64xbf16> -> <64xf32>
      %bb = tile.broadcast %fb [1] : <64xf32> -> <64x64xf32>
      %s = tile.add %acc, %bb : <64x64xf32>
      %zero = tile.full 0.000000e+00 : <64x64xf32>
      %r = tile.max %s, %zero : <64x64xf32>
      %vc = tile.view %C[%i, %j] : <[M, N], bf16> -> <64x64xbf16>
      %o = tile.cast %r : <64x64xf32> -> <64x64xbf16>
      tile.store %o, %vc : <64x64xbf16>, <64x64xbf16>
    }
  }
}

