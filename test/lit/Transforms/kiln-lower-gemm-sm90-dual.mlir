// RUN: kiln-opt %s --split-input-file --kiln-expand-composites --kiln-lower-gemm-sm90 | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kiln-expand-composites --kiln-lower-gemm-sm90="cluster=0 decode-rows=16" | FileCheck %s --check-prefix=ALL

// (silu is a composite: expanded first, as the pipeline does.)
// Two products sharing A's tile (a SwiGLU MLP's gate and up projections): one wgmma of twice
// C's tile width computes both, its first half of B's boxes from Wg, its second from Wu, at
// the same columns of C. The plan's tile and grid are C's (the 128 x 256 product: 128 x 128
// of C); three tensor maps in (X, Wg, Wu) and C's out; no split-K workspace.
// CHECK: gpu.func @swiglu__sm90(
// CHECK-SAME: \22grid\22:[{\22arg\22:0,\22dim\22:0,\22name\22:\22M\22,\22tile\22:128},{\22arg\22:1,\22dim\22:1,\22name\22:\22N\22,\22tile\22:64}]
// CHECK-SAME: \22arg\22:2,\22box\22:[64,64],\22dim\22:0,\22kind\22:\22tensormap\22
// CHECK-NOT: \22kind\22:\22workspace\22
// CHECK-SAME: \22tile\22:[128,64,64]
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>
// CHECK: gpu.func @swiglu__sm90_n256(
// CHECK-SAME: \22tile\22:[128,128,64]
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 256, k = 16>
// CHECK: gpu.func @swiglu__sm90_m64(
// CHECK-SAME: \22tile\22:[64,64,64]
// CHECK-NOT: gpu.func
// Clusters, the decode twin and ping-pong are not made for two products.
// ALL: gpu.func @swiglu__sm90(
// ALL-NOT: x2(
// ALL-NOT: _dec(
// ALL: gpu.func @swiglu__sm90_n256(
// ALL: gpu.func @swiglu__sm90_m64(
// ALL-NOT: gpu.func
module {
  tile.kernel @swiglu(in %X: !tile.tensor<[M, K], bf16>, in %Wg: !tile.tensor<[K, N], bf16>, in %Wu: !tile.tensor<[K, N], bf16>, out %H: !tile.tensor<[M, N], bf16>) {
    %M = tile.dim "M"
    %N = tile.dim "N"
    %K = tile.dim "K"
    %c64 = arith.constant 64 : index
    %gm = arith.ceildivsi %M, %c64 : index
    %gn = arith.ceildivsi %N, %c64 : index
    tile.grid (%i, %j) in (%gm, %gn) {
      %c32 = arith.constant 32 : index
      %kt = arith.ceildivsi %K, %c32 : index
      %z0 = tile.full 0.000000e+00 : <64x64xf32>
      %z1 = tile.full 0.000000e+00 : <64x64xf32>
      %acc:2 = tile.loop %kk to %kt stages 3 carry(%c = %z0 : !tile.tile<64x64xf32>, %d = %z1 : !tile.tile<64x64xf32>) {
        %va = tile.view %X[%i, %kk] : <[M, K], bf16> -> <64x32xbf16>
        %a = tile.load %va : <64x32xbf16> -> <64x32xbf16>
        %vg = tile.view %Wg[%kk, %j] : <[K, N], bf16> -> <32x64xbf16>
        %g = tile.load %vg : <32x64xbf16> -> <32x64xbf16>
        %pg = tile.dot %a, %g, %c : <64x32xbf16>, <32x64xbf16> -> <64x64xf32>
        %vu = tile.view %Wu[%kk, %j] : <[K, N], bf16> -> <32x64xbf16>
        %u = tile.load %vu : <32x64xbf16> -> <32x64xbf16>
        %pu = tile.dot %a, %u, %d : <64x32xbf16>, <32x64xbf16> -> <64x64xf32>
        tile.yield %pg, %pu : !tile.tile<64x64xf32>, !tile.tile<64x64xf32>
      }
      %vh = tile.view %H[%i, %j] : <[M, N], bf16> -> <64x64xbf16>
      %s = tile.silu %acc#0 : <64x64xf32>
      %m = tile.mul %s, %acc#1 : <64x64xf32>
      %o = tile.cast %m : <64x64xf32> -> <64x64xbf16>
      tile.store %o, %vh : <64x64xbf16>, <64x64xbf16>
    }
  }
}

// -----

// Two products that do not share A's tile are not this shape: no twin, and the module says why.
// CHECK: module attributes {kiln.sm90 = "kernel 'two_a': the two products do not share A's tile"}
// CHECK-NOT: gpu.func
module {
  tile.kernel @two_a(in %X: !tile.tensor<[M, K], bf16>, in %Y: !tile.tensor<[M, K], bf16>, in %Wg: !tile.tensor<[K, N], bf16>, out %H: !tile.tensor<[M, N], bf16>) {
    %M = tile.dim "M"
    %N = tile.dim "N"
    %K = tile.dim "K"
    %c64 = arith.constant 64 : index
    %gm = arith.ceildivsi %M, %c64 : index
    %gn = arith.ceildivsi %N, %c64 : index
    tile.grid (%i, %j) in (%gm, %gn) {
      %c32 = arith.constant 32 : index
      %kt = arith.ceildivsi %K, %c32 : index
      %z0 = tile.full 0.000000e+00 : <64x64xf32>
      %acc:2 = tile.loop %kk to %kt stages 3 carry(%c = %z0 : !tile.tile<64x64xf32>, %d = %z0 : !tile.tile<64x64xf32>) {
        %va = tile.view %X[%i, %kk] : <[M, K], bf16> -> <64x32xbf16>
        %a = tile.load %va : <64x32xbf16> -> <64x32xbf16>
        %vy = tile.view %Y[%i, %kk] : <[M, K], bf16> -> <64x32xbf16>
        %y = tile.load %vy : <64x32xbf16> -> <64x32xbf16>
        %vg = tile.view %Wg[%kk, %j] : <[K, N], bf16> -> <32x64xbf16>
        %g = tile.load %vg : <32x64xbf16> -> <32x64xbf16>
        %pg = tile.dot %a, %g, %c : <64x32xbf16>, <32x64xbf16> -> <64x64xf32>
        %pu = tile.dot %y, %g, %d : <64x32xbf16>, <32x64xbf16> -> <64x64xf32>
        tile.yield %pg, %pu : !tile.tile<64x64xf32>, !tile.tile<64x64xf32>
      }
      %vh = tile.view %H[%i, %j] : <[M, N], bf16> -> <64x64xbf16>
      %m = tile.mul %acc#0, %acc#1 : <64x64xf32>
      %o = tile.cast %m : <64x64xf32> -> <64x64xbf16>
      tile.store %o, %vh : <64x64xbf16>, <64x64xbf16>
    }
  }
}
