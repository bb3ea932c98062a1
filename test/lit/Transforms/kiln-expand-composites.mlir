// RUN: kiln-opt %s --pass-pipeline='builtin.module(tile.kernel(kiln-expand-composites))' | FileCheck %s
// RUN: kiln-opt %s --pass-pipeline='builtin.module(tile.kernel(kiln-expand-composites))' | FileCheck %s --check-prefix=NOCOMPOSITE
// kiln-expand-composites rewrites relu, gelu, silu and sigmoid into primitive tile ops,
// in the tile's own element type; everything else is left alone.

// No composite survives the pass anywhere inside a kernel.
// NOCOMPOSITE-NOT: tile.relu
// NOCOMPOSITE-NOT: tile.gelu
// NOCOMPOSITE-NOT: tile.silu
// NOCOMPOSITE-NOT: tile.sigmoid
// NOCOMPOSITE: func.func @not_a_kernel
// NOCOMPOSITE: tile.relu

// relu(x) = max(x, 0)
// CHECK-LABEL: tile.kernel @relu
// CHECK:      %[[X:.+]] = tile.load %{{.+}} : <4x8xf32> -> <4x8xf32>
// CHECK-NEXT: %[[ZERO:.+]] = tile.full 0.000000e+00 : <4x8xf32>
// CHECK-NEXT: %[[R:.+]] = tile.max %[[X]], %[[ZERO]] : <4x8xf32>
// CHECK-NEXT: %[[V:.+]] = tile.view %Y
// CHECK-NEXT: tile.store %[[R]], %[[V]]
tile.kernel @relu(in %X : !tile.tensor<[M, 8], f32>, out %Y : !tile.tensor<[M, 8], f32>) {
  %m = tile.dim "M"
  tile.grid (%i) in (%m) {
    %vx = tile.view %X[%i, %i] : !tile.tensor<[M, 8], f32> -> !tile.view<4x8xf32>
    %x = tile.load %vx : !tile.view<4x8xf32> -> !tile.tile<4x8xf32>
    %r = tile.relu %x : !tile.tile<4x8xf32>
    %vy = tile.view %Y[%i, %i] : !tile.tensor<[M, 8], f32> -> !tile.view<4x8xf32>
    tile.store %r, %vy : !tile.tile<4x8xf32>, !tile.view<4x8xf32>
  }
}

// sigmoid(x) = 1 / (1 + exp(-x)), the same `1` tile both times.
// CHECK-LABEL: tile.kernel @sigmoid
// CHECK:      %[[X:.+]] = tile.load %{{.+}} : <16xf16> -> <16xf16>
// CHECK-NEXT: %[[NEG:.+]] = tile.neg %[[X]] : <16xf16>
// CHECK-NEXT: %[[EXP:.+]] = tile.exp %[[NEG]] : <16xf16>
// CHECK-NEXT: %[[ONE:.+]] = tile.full 1.000000e+00 : <16xf16>
// CHECK-NEXT: %[[DEN:.+]] = tile.add %[[ONE]], %[[EXP]] : <16xf16>
// CHECK-NEXT: %[[R:.+]] = tile.div %[[ONE]], %[[DEN]] : <16xf16>
// CHECK-NEXT: %[[V:.+]] = tile.view %Y
// CHECK-NEXT: tile.store %[[R]], %[[V]]
tile.kernel @sigmoid(in %X : !tile.tensor<[N], f16>, out %Y : !tile.tensor<[N], f16>) {
  %n = tile.dim "N"
  tile.grid (%i) in (%n) {
    %vx = tile.view %X[%i] : !tile.tensor<[N], f16> -> !tile.view<16xf16>
    %x = tile.load %vx : !tile.view<16xf16> -> !tile.tile<16xf16>
    %r = tile.sigmoid %x : !tile.tile<16xf16>
    %vy = tile.view %Y[%i] : !tile.tensor<[N], f16> -> !tile.view<16xf16>
    tile.store %r, %vy : !tile.tile<16xf16>, !tile.view<16xf16>
  }
}

// silu(x) = x * sigmoid(x), and the sigmoid it introduces is expanded as well.
// CHECK-LABEL: tile.kernel @silu
// CHECK:      %[[X:.+]] = tile.load %{{.+}} : <2x4x8xbf16> -> <2x4x8xbf16>
// CHECK-NEXT: %[[NEG:.+]] = tile.neg %[[X]] : <2x4x8xbf16>
// CHECK-NEXT: %[[EXP:.+]] = tile.exp %[[NEG]] : <2x4x8xbf16>
// CHECK-NEXT: %[[ONE:.+]] = tile.full 1.000000e+00 : <2x4x8xbf16>
// CHECK-NEXT: %[[DEN:.+]] = tile.add %[[ONE]], %[[EXP]] : <2x4x8xbf16>
// CHECK-NEXT: %[[SIG:.+]] = tile.div %[[ONE]], %[[DEN]] : <2x4x8xbf16>
// CHECK-NEXT: %[[R:.+]] = tile.mul %[[X]], %[[SIG]] : <2x4x8xbf16>
// CHECK-NEXT: %[[V:.+]] = tile.view %Y
// CHECK-NEXT: tile.store %[[R]], %[[V]]
tile.kernel @silu(in %X : !tile.tensor<[B, M, N], bf16>, out %Y : !tile.tensor<[B, M, N], bf16>) {
  %b = tile.dim "B"
  tile.grid (%i, %j, %k) in (%b, %b, %b) {
    %vx = tile.view %X[%i, %j, %k] : !tile.tensor<[B, M, N], bf16> -> !tile.view<2x4x8xbf16>
    %x = tile.load %vx : !tile.view<2x4x8xbf16> -> !tile.tile<2x4x8xbf16>
    %r = tile.silu %x : !tile.tile<2x4x8xbf16>
    %vy = tile.view %Y[%i, %j, %k] : !tile.tensor<[B, M, N], bf16> -> !tile.view<2x4x8xbf16>
    tile.store %r, %vy : !tile.tile<2x4x8xbf16>, !tile.view<2x4x8xbf16>
  }
}

// gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// CHECK-LABEL: tile.kernel @gelu
// CHECK:      %[[X:.+]] = tile.load %{{.+}} : <8x8xf32> -> <8x8xf32>
// CHECK-NEXT: %[[X2:.+]] = tile.mul %[[X]], %[[X]] : <8x8xf32>
// CHECK-NEXT: %[[X3:.+]] = tile.mul %[[X2]], %[[X]] : <8x8xf32>
// CHECK-NEXT: %[[CX3:.+]] = tile.scale %[[X3]], 4.471500e-02 : <8x8xf32>
// CHECK-NEXT: %[[INNER:.+]] = tile.add %[[X]], %[[CX3]] : <8x8xf32>
// CHECK-NEXT: %[[ARG:.+]] = tile.scale %[[INNER]], 0.79788456080286541 : <8x8xf32>
// CHECK-NEXT: %[[T:.+]] = tile.tanh %[[ARG]] : <8x8xf32>
// CHECK-NEXT: %[[ONE:.+]] = tile.full 1.000000e+00 : <8x8xf32>
// CHECK-NEXT: %[[ONEPLUS:.+]] = tile.add %[[ONE]], %[[T]] : <8x8xf32>
// CHECK-NEXT: %[[HALFX:.+]] = tile.scale %[[X]], 5.000000e-01 : <8x8xf32>
// CHECK-NEXT: %[[R:.+]] = tile.mul %[[HALFX]], %[[ONEPLUS]] : <8x8xf32>
// CHECK-NEXT: %[[V:.+]] = tile.view %Y
// CHECK-NEXT: tile.store %[[R]], %[[V]]
tile.kernel @gelu(in %X : !tile.tensor<[M, N], f32>, out %Y : !tile.tensor<[M, N], f32>) {
  %m = tile.dim "M"
  tile.grid (%i) in (%m) {
    %vx = tile.view %X[%i, %i] : !tile.tensor<[M, N], f32> -> !tile.view<8x8xf32>
    %x = tile.load %vx : !tile.view<8x8xf32> -> !tile.tile<8x8xf32>
    %r = tile.gelu %x : !tile.tile<8x8xf32>
    %vy = tile.view %Y[%i, %i] : !tile.tensor<[M, N], f32> -> !tile.view<8x8xf32>
    tile.store %r, %vy : !tile.tile<8x8xf32>, !tile.view<8x8xf32>
  }
}

// Composites nested in a tile.loop body are expanded too, and the loop is kept.
// CHECK-LABEL: tile.kernel @in_loop
// CHECK:      tile.loop %{{.+}} to %{{.+}} stages 2 carry(%[[C:.+]] = %{{.+}} : !tile.tile<4xf32>) {
// CHECK-NEXT:   %[[ZERO:.+]] = tile.full 0.000000e+00 : <4xf32>
// CHECK-NEXT:   %[[R:.+]] = tile.max %[[C]], %[[ZERO]] : <4xf32>
// CHECK-NEXT:   tile.yield %[[R]] : !tile.tile<4xf32>
tile.kernel @in_loop(in %X : !tile.tensor<[N], f32>, out %Y : !tile.tensor<[N], f32>) {
  %n = tile.dim "N"
  tile.grid (%i) in (%n) {
    %vx = tile.view %X[%i] : !tile.tensor<[N], f32> -> !tile.view<4xf32>
    %x = tile.load %vx : !tile.view<4xf32> -> !tile.tile<4xf32>
    %r = tile.loop %k to %n stages 2 carry(%c = %x : !tile.tile<4xf32>) {
      %y = tile.relu %c : !tile.tile<4xf32>
      tile.yield %y : !tile.tile<4xf32>
    }
    %vy = tile.view %Y[%i] : !tile.tensor<[N], f32> -> !tile.view<4xf32>
    tile.store %r, %vy : !tile.tile<4xf32>, !tile.view<4xf32>
  }
}

// Primitive ops pass through unchanged and in order; nothing is added.
// CHECK-LABEL: tile.kernel @primitives
// CHECK:      %[[X:.+]] = tile.load %{{.+}} {padding = 0xFFF0000000000000 : f64} : <4x8xf32> -> <4x8xf32>
// CHECK-NEXT: %[[A:.+]] = tile.max %[[X]], %[[X]] : <4x8xf32>
// CHECK-NEXT: %[[B:.+]] = tile.min %[[A]], %[[X]] : <4x8xf32>
// CHECK-NEXT: %[[C:.+]] = tile.add %[[B]], %[[X]] : <4x8xf32>
// CHECK-NEXT: %[[D:.+]] = tile.sub %[[C]], %[[X]] : <4x8xf32>
// CHECK-NEXT: %[[E:.+]] = tile.mul %[[D]], %[[X]] : <4x8xf32>
// CHECK-NEXT: %[[F:.+]] = tile.div %[[E]], %[[X]] : <4x8xf32>
// CHECK-NEXT: %[[G:.+]] = tile.neg %[[F]] : <4x8xf32>
// CHECK-NEXT: %[[H:.+]] = tile.exp %[[G]] : <4x8xf32>
// CHECK-NEXT: %[[I:.+]] = tile.exp2 %[[H]] : <4x8xf32>
// CHECK-NEXT: %[[J:.+]] = tile.log %[[I]] : <4x8xf32>
// CHECK-NEXT: %[[K:.+]] = tile.sqrt %[[J]] : <4x8xf32>
// CHECK-NEXT: %[[L:.+]] = tile.rsqrt %[[K]] : <4x8xf32>
// CHECK-NEXT: %[[M:.+]] = tile.tanh %[[L]] : <4x8xf32>
// CHECK-NEXT: %[[N:.+]] = tile.scale %[[M]], 2.500000e-01 : <4x8xf32>
// CHECK-NEXT: %[[RS:.+]] = tile.reduce_sum %[[N]] dim 1 : <4x8xf32> -> <4xf32>
// CHECK-NEXT: %[[RM:.+]] = tile.reduce_max %[[N]] dim 1 : <4x8xf32> -> <4xf32>
// CHECK-NEXT: %[[S:.+]] = tile.add %[[RS]], %[[RM]] : <4xf32>
// CHECK-NEXT: %[[BC:.+]] = tile.broadcast %[[S]] [0] : <4xf32> -> <4x8xf32>
// CHECK-NEXT: %[[Z:.+]] = tile.full 0.000000e+00 : <4x8xf32>
// CHECK-NEXT: %[[MX:.+]] = tile.max %[[BC]], %[[Z]] : <4x8xf32>
// CHECK-NEXT: %[[H16:.+]] = tile.cast %[[MX]] : <4x8xf32> -> <4x8xf16>
// CHECK-NEXT: %[[V:.+]] = tile.view %Y
// CHECK-NEXT: tile.store %[[H16]], %[[V]]
// CHECK-NEXT: }
// CHECK-NEXT: }
tile.kernel @primitives(in %X : !tile.tensor<[M, N], f32>, out %Y : !tile.tensor<[M, N], f16>) {
  %m = tile.dim "M"
  tile.grid (%i) in (%m) {
    %vx = tile.view %X[%i, %i] : !tile.tensor<[M, N], f32> -> !tile.view<4x8xf32>
    %x = tile.load %vx {padding = 0xFFF0000000000000 : f64} : !tile.view<4x8xf32> -> !tile.tile<4x8xf32>
    %a = tile.max %x, %x : !tile.tile<4x8xf32>
    %b = tile.min %a, %x : !tile.tile<4x8xf32>
    %c = tile.add %b, %x : !tile.tile<4x8xf32>
    %d = tile.sub %c, %x : !tile.tile<4x8xf32>
    %e = tile.mul %d, %x : !tile.tile<4x8xf32>
    %f = tile.div %e, %x : !tile.tile<4x8xf32>
    %g = tile.neg %f : !tile.tile<4x8xf32>
    %h = tile.exp %g : !tile.tile<4x8xf32>
    %i2 = tile.exp2 %h : !tile.tile<4x8xf32>
    %j = tile.log %i2 : !tile.tile<4x8xf32>
    %k = tile.sqrt %j : !tile.tile<4x8xf32>
    %l = tile.rsqrt %k : !tile.tile<4x8xf32>
    %mm = tile.tanh %l : !tile.tile<4x8xf32>
    %n = tile.scale %mm, 0.25 : !tile.tile<4x8xf32>
    %rs = tile.reduce_sum %n dim 1 : !tile.tile<4x8xf32> -> !tile.tile<4xf32>
    %rm = tile.reduce_max %n dim 1 : !tile.tile<4x8xf32> -> !tile.tile<4xf32>
    %s = tile.add %rs, %rm : !tile.tile<4xf32>
    %bc = tile.broadcast %s [0] : !tile.tile<4xf32> -> !tile.tile<4x8xf32>
    %z = tile.full 0.0 : !tile.tile<4x8xf32>
    %mx = tile.max %bc, %z : !tile.tile<4x8xf32>
    %h16 = tile.cast %mx : !tile.tile<4x8xf32> -> !tile.tile<4x8xf16>
    %vy = tile.view %Y[%i, %i] : !tile.tensor<[M, N], f16> -> !tile.view<4x8xf16>
    tile.store %h16, %vy : !tile.tile<4x8xf16>, !tile.view<4x8xf16>
  }
}

// The pass drives its patterns with the greedy rewriter, which also folds (an identity
// tile.cast disappears) and erases dead ops (an unused exp; an unused load, which only
// reads). Used values are never touched.
// CHECK-LABEL: tile.kernel @greedy_driver_cleanup
// CHECK:      %[[VX:.+]] = tile.view %X
// CHECK-NEXT: %[[X:.+]] = tile.load %[[VX]] : <4xf32> -> <4xf32>
// CHECK-NOT:  tile.cast
// CHECK-NOT:  tile.exp
// CHECK:      tile.store %[[X]], %{{.+}} : <4xf32>, <4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
tile.kernel @greedy_driver_cleanup(in %X : !tile.tensor<[N], f32>, out %Y : !tile.tensor<[N], f32>) {
  %n = tile.dim "N"
  tile.grid (%i) in (%n) {
    %vx = tile.view %X[%i] : !tile.tensor<[N], f32> -> !tile.view<4xf32>
    %x = tile.load %vx : !tile.view<4xf32> -> !tile.tile<4xf32>
    %unused = tile.load %vx : !tile.view<4xf32> -> !tile.tile<4xf32>
    %same = tile.cast %x : !tile.tile<4xf32> -> !tile.tile<4xf32>
    %dead = tile.exp %x : !tile.tile<4xf32>
    %vy = tile.view %Y[%i] : !tile.tensor<[N], f32> -> !tile.view<4xf32>
    tile.store %same, %vy : !tile.tile<4xf32>, !tile.view<4xf32>
  }
}

// The pass runs on tile.kernel only: a composite elsewhere is not touched.
// CHECK-LABEL: func.func @not_a_kernel
// CHECK-NEXT: tile.relu
func.func @not_a_kernel(%t: !tile.tile<4xf32>) -> !tile.tile<4xf32> {
  %r = tile.relu %t : !tile.tile<4xf32>
  return %r : !tile.tile<4xf32>
}
