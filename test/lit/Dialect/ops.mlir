// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// Every tile op parses, prints and re-parses to the same text.

// CHECK-LABEL: tile.kernel @gemm_bias_relu(in %A : !tile.tensor<[M, K], bf16>, in %B : !tile.tensor<[K, N], bf16>, in %bias : !tile.tensor<[N], bf16>, out %C : !tile.tensor<[M, N], bf16>)
tile.kernel @gemm_bias_relu(in %A : !tile.tensor<[M, K], bf16>, in %B : !tile.tensor<[K, N], bf16>,
                            in %bias : !tile.tensor<[N], bf16>, out %C : !tile.tensor<[M, N], bf16>) {
  // CHECK: tile.dim "M"
  %M = tile.dim "M"
  %N = tile.dim "N"
  %K = tile.dim "K"
  %c32 = arith.constant 32 : index
  %c16 = arith.constant 16 : index
  %gm = arith.ceildivsi %M, %c32 : index
  %gn = arith.ceildivsi %N, %c32 : index
  %gk = arith.ceildivsi %K, %c16 : index
  // CHECK: tile.grid (%{{.*}}, %{{.*}}) in (%{{.*}}, %{{.*}}) {
  tile.grid (%i, %j) in (%gm, %gn) {
    // CHECK: tile.full 0.000000e+00 : !tile.tile<32x32xf32>
    %z = tile.full 0.0 : !tile.tile<32x32xf32>
    // CHECK: tile.loop %{{.*}} to %{{.*}} stages 3 carry(%{{.*}} = %{{.*}} : !tile.tile<32x32xf32>) {
    %acc = tile.loop %kk to %gk stages 3 carry(%c = %z : !tile.tile<32x32xf32>) {
      // CHECK: tile.view %A[%{{.*}}, %{{.*}}] : !tile.tensor<[M, K], bf16> -> !tile.view<32x16xbf16>
      %va = tile.view %A[%i, %kk] : !tile.tensor<[M, K], bf16> -> !tile.view<32x16xbf16>
      %vb = tile.view %B[%kk, %j] : !tile.tensor<[K, N], bf16> -> !tile.view<16x32xbf16>
      // CHECK: tile.load %{{.*}} : !tile.view<32x16xbf16> -> !tile.tile<32x16xbf16>
      %a = tile.load %va : !tile.view<32x16xbf16> -> !tile.tile<32x16xbf16>
      %b = tile.load %vb : !tile.view<16x32xbf16> -> !tile.tile<16x32xbf16>
      // CHECK: tile.dot %{{.*}}, %{{.*}}, %{{.*}} : !tile.tile<32x16xbf16>, !tile.tile<16x32xbf16> -> !tile.tile<32x32xf32>
      %d = tile.dot %a, %b, %c : !tile.tile<32x16xbf16>, !tile.tile<16x32xbf16> -> !tile.tile<32x32xf32>
      // CHECK: tile.yield %{{.*}} : !tile.tile<32x32xf32>
      tile.yield %d : !tile.tile<32x32xf32>
    }
    %vbias = tile.view %bias[%j] : !tile.tensor<[N], bf16> -> !tile.view<32xbf16>
    %bias16 = tile.load %vbias : !tile.view<32xbf16> -> !tile.tile<32xbf16>
    // CHECK: tile.cast %{{.*}} : !tile.tile<32xbf16> -> !tile.tile<32xf32>
    %bias32 = tile.cast %bias16 : !tile.tile<32xbf16> -> !tile.tile<32xf32>
    // CHECK: tile.broadcast %{{.*}} [1] : !tile.tile<32xf32> -> !tile.tile<32x32xf32>
    %row = tile.broadcast %bias32 [1] : !tile.tile<32xf32> -> !tile.tile<32x32xf32>
    // CHECK: tile.add
    %s = tile.add %acc, %row : !tile.tile<32x32xf32>
    // CHECK: tile.relu
    %r = tile.relu %s : !tile.tile<32x32xf32>
    %o = tile.cast %r : !tile.tile<32x32xf32> -> !tile.tile<32x32xbf16>
    %vc = tile.view %C[%i, %j] : !tile.tensor<[M, N], bf16> -> !tile.view<32x32xbf16>
    // CHECK: tile.store %{{.*}}, %{{.*}} : !tile.tile<32x32xbf16>, !tile.view<32x32xbf16>
    tile.store %o, %vc : !tile.tile<32x32xbf16>, !tile.view<32x32xbf16>
  }
}

// CHECK-LABEL: tile.kernel @every_elementwise_op
tile.kernel @every_elementwise_op(in %X : !tile.tensor<[M, 64], f32>, out %Y : !tile.tensor<[M, 64], f16>) {
  %M = tile.dim "M"
  tile.grid (%i) in (%M) {
    %v = tile.view %X[%i, %i] : !tile.tensor<[M, 64], f32> -> !tile.view<1x64xf32>
    // CHECK: tile.load %{{.*}} {padding = 0xFFF0000000000000 : f64}
    %x = tile.load %v {padding = 0xFFF0000000000000 : f64} : !tile.view<1x64xf32> -> !tile.tile<1x64xf32>
    // CHECK: tile.sub
    %a = tile.sub %x, %x : !tile.tile<1x64xf32>
    // CHECK: tile.mul
    %b = tile.mul %a, %x : !tile.tile<1x64xf32>
    // CHECK: tile.div
    %c = tile.div %b, %x : !tile.tile<1x64xf32>
    // CHECK: tile.max
    %d = tile.max %c, %x : !tile.tile<1x64xf32>
    // CHECK: tile.min
    %e = tile.min %d, %x : !tile.tile<1x64xf32>
    // CHECK: tile.neg
    %f = tile.neg %e : !tile.tile<1x64xf32>
    // CHECK: tile.exp
    %g = tile.exp %f : !tile.tile<1x64xf32>
    // CHECK: tile.exp2
    %h = tile.exp2 %g : !tile.tile<1x64xf32>
    // CHECK: tile.log
    %k = tile.log %h : !tile.tile<1x64xf32>
    // CHECK: tile.sqrt
    %l = tile.sqrt %k : !tile.tile<1x64xf32>
    // CHECK: tile.rsqrt
    %m = tile.rsqrt %l : !tile.tile<1x64xf32>
    // CHECK: tile.tanh
    %n = tile.tanh %m : !tile.tile<1x64xf32>
    // CHECK: tile.sigmoid
    %o = tile.sigmoid %n : !tile.tile<1x64xf32>
    // CHECK: tile.gelu
    %p = tile.gelu %o : !tile.tile<1x64xf32>
    // CHECK: tile.silu
    %q = tile.silu %p : !tile.tile<1x64xf32>
    // CHECK: tile.scale %{{.*}}, 5.000000e-01
    %r = tile.scale %q, 0.5 : !tile.tile<1x64xf32>
    // CHECK: tile.reduce_sum %{{.*}} dim 1 : !tile.tile<1x64xf32> -> !tile.tile<1xf32>
    %s = tile.reduce_sum %r dim 1 : !tile.tile<1x64xf32> -> !tile.tile<1xf32>
    // CHECK: tile.reduce_max %{{.*}} dim 1
    %t = tile.reduce_max %r dim 1 : !tile.tile<1x64xf32> -> !tile.tile<1xf32>
    // CHECK: tile.splat %{{.*}} : index -> !tile.tile<1xf32>
    %u = tile.splat %M : index -> !tile.tile<1xf32>
    %w = tile.add %t, %u : !tile.tile<1xf32>
    %w2 = tile.add %w, %s : !tile.tile<1xf32>
    %bc = tile.broadcast %w2 [0] : !tile.tile<1xf32> -> !tile.tile<1x64xf32>
    %y = tile.cast %bc : !tile.tile<1x64xf32> -> !tile.tile<1x64xf16>
    %vy = tile.view %Y[%i, %i] : !tile.tensor<[M, 64], f16> -> !tile.view<1x64xf16>
    tile.store %y, %vy : !tile.tile<1x64xf16>, !tile.view<1x64xf16>
  }
}
