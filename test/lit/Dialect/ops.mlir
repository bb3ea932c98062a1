// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// RUN: kiln-opt %s --mlir-print-op-generic | kiln-opt | FileCheck %s
// Every tile op parses, prints and re-parses (custom and generic form) to the same text.
// Inside tile ops kiln-opt prints tile types without the `!tile.` prefix
// (`<32x32xf32>`); the kernel signature, loop carry lists and tile.yield keep it.

// CHECK-LABEL: tile.kernel @gemm_bias_relu(in %A: !tile.tensor<[M, K], bf16>, in %B: !tile.tensor<[K, N], bf16>, in %bias: !tile.tensor<[N], bf16>, out %C: !tile.tensor<[M, N], bf16>) {
tile.kernel @gemm_bias_relu(in %A : !tile.tensor<[M, K], bf16>, in %B : !tile.tensor<[K, N], bf16>,
                            in %bias : !tile.tensor<[N], bf16>, out %C : !tile.tensor<[M, N], bf16>) {
  // CHECK-NEXT: %M = tile.dim "M"
  // CHECK-NEXT: %N = tile.dim "N"
  // CHECK-NEXT: %K = tile.dim "K"
  %M = tile.dim "M"
  %N = tile.dim "N"
  %K = tile.dim "K"
  %c32 = arith.constant 32 : index
  %c16 = arith.constant 16 : index
  // CHECK: %[[GM:.+]] = arith.ceildivsi %M, %c32 : index
  // CHECK: %[[GN:.+]] = arith.ceildivsi %N, %c32 : index
  // CHECK: %[[GK:.+]] = arith.ceildivsi %K, %c16 : index
  %gm = arith.ceildivsi %M, %c32 : index
  %gn = arith.ceildivsi %N, %c32 : index
  %gk = arith.ceildivsi %K, %c16 : index
  // CHECK: tile.grid (%[[I:.+]], %[[J:.+]]) in (%[[GM]], %[[GN]]) {
  tile.grid (%i, %j) in (%gm, %gn) {
    // CHECK-NEXT: %[[Z:.+]] = tile.full 0.000000e+00 : <32x32xf32>
    %z = tile.full 0.0 : !tile.tile<32x32xf32>
    // CHECK-NEXT: %[[ACC:.+]] = tile.loop %[[KK:.+]] to %[[GK]] stages 3 carry(%[[C:.+]] = %[[Z]] : !tile.tile<32x32xf32>) {
    %acc = tile.loop %kk to %gk stages 3 carry(%c = %z : !tile.tile<32x32xf32>) {
      // CHECK-NEXT: %[[VA:.+]] = tile.view %A[%[[I]], %[[KK]]] : <[M, K], bf16> -> <32x16xbf16>
      // CHECK-NEXT: %[[VB:.+]] = tile.view %B[%[[KK]], %[[J]]] : <[K, N], bf16> -> <16x32xbf16>
      %va = tile.view %A[%i, %kk] : !tile.tensor<[M, K], bf16> -> !tile.view<32x16xbf16>
      %vb = tile.view %B[%kk, %j] : !tile.tensor<[K, N], bf16> -> !tile.view<16x32xbf16>
      // CHECK-NEXT: %[[LA:.+]] = tile.load %[[VA]] : <32x16xbf16> -> <32x16xbf16>
      // CHECK-NEXT: %[[LB:.+]] = tile.load %[[VB]] : <16x32xbf16> -> <16x32xbf16>
      %a = tile.load %va : !tile.view<32x16xbf16> -> !tile.tile<32x16xbf16>
      %b = tile.load %vb : !tile.view<16x32xbf16> -> !tile.tile<16x32xbf16>
      // CHECK-NEXT: %[[D:.+]] = tile.dot %[[LA]], %[[LB]], %[[C]] : <32x16xbf16>, <16x32xbf16> -> <32x32xf32>
      %d = tile.dot %a, %b, %c : !tile.tile<32x16xbf16>, !tile.tile<16x32xbf16> -> !tile.tile<32x32xf32>
      // CHECK-NEXT: tile.yield %[[D]] : !tile.tile<32x32xf32>
      // CHECK-NEXT: }
      tile.yield %d : !tile.tile<32x32xf32>
    }
    // CHECK-NEXT: %[[VBIAS:.+]] = tile.view %bias[%[[J]]] : <[N], bf16> -> <32xbf16>
    // CHECK-NEXT: %[[B16:.+]] = tile.load %[[VBIAS]] : <32xbf16> -> <32xbf16>
    %vbias = tile.view %bias[%j] : !tile.tensor<[N], bf16> -> !tile.view<32xbf16>
    %bias16 = tile.load %vbias : !tile.view<32xbf16> -> !tile.tile<32xbf16>
    // CHECK-NEXT: %[[B32:.+]] = tile.cast %[[B16]] : <32xbf16> -> <32xf32>
    %bias32 = tile.cast %bias16 : !tile.tile<32xbf16> -> !tile.tile<32xf32>
    // CHECK-NEXT: %[[ROW:.+]] = tile.broadcast %[[B32]] [1] : <32xf32> -> <32x32xf32>
    %row = tile.broadcast %bias32 [1] : !tile.tile<32xf32> -> !tile.tile<32x32xf32>
    // CHECK-NEXT: %[[S:.+]] = tile.add %[[ACC]], %[[ROW]] : <32x32xf32>
    %s = tile.add %acc, %row : !tile.tile<32x32xf32>
    // CHECK-NEXT: %[[R:.+]] = tile.relu %[[S]] : <32x32xf32>
    %r = tile.relu %s : !tile.tile<32x32xf32>
    // CHECK-NEXT: %[[O:.+]] = tile.cast %[[R]] : <32x32xf32> -> <32x32xbf16>
    %o = tile.cast %r : !tile.tile<32x32xf32> -> !tile.tile<32x32xbf16>
    // CHECK-NEXT: %[[VC:.+]] = tile.view %C[%[[I]], %[[J]]] : <[M, N], bf16> -> <32x32xbf16>
    %vc = tile.view %C[%i, %j] : !tile.tensor<[M, N], bf16> -> !tile.view<32x32xbf16>
    // CHECK-NEXT: tile.store %[[O]], %[[VC]] : <32x32xbf16>, <32x32xbf16>
    // CHECK-NEXT: }
    // CHECK-NEXT: }
    tile.store %o, %vc : !tile.tile<32x32xbf16>, !tile.view<32x32xbf16>
  }
}

// CHECK-LABEL: tile.kernel @every_elementwise_op(in %X: !tile.tensor<[M, 64], f32>, out %Y: !tile.tensor<[M, 64], f16>) {
tile.kernel @every_elementwise_op(in %X : !tile.tensor<[M, 64], f32>, out %Y : !tile.tensor<[M, 64], f16>) {
  %M = tile.dim "M"
  // CHECK: tile.grid (%[[I:.+]]) in (%M) {
  tile.grid (%i) in (%M) {
    // CHECK-NEXT: %[[V:.+]] = tile.view %X[%[[I]], %[[I]]] : <[M, 64], f32> -> <1x64xf32>
    %v = tile.view %X[%i, %i] : !tile.tensor<[M, 64], f32> -> !tile.view<1x64xf32>
    // CHECK-NEXT: %[[X:.+]] = tile.load %[[V]] {padding = 0xFFF0000000000000 : f64} : <1x64xf32> -> <1x64xf32>
    %x = tile.load %v {padding = 0xFFF0000000000000 : f64} : !tile.view<1x64xf32> -> !tile.tile<1x64xf32>
    // CHECK-NEXT: %[[A:.+]] = tile.sub %[[X]], %[[X]] : <1x64xf32>
    %a = tile.sub %x, %x : !tile.tile<1x64xf32>
    // CHECK-NEXT: %[[B:.+]] = tile.mul %[[A]], %[[X]] : <1x64xf32>
    %b = tile.mul %a, %x : !tile.tile<1x64xf32>
    // CHECK-NEXT: %[[C:.+]] = tile.div %[[B]], %[[X]] : <1x64xf32>
    %c = tile.div %b, %x : !tile.tile<1x64xf32>
    // CHECK-NEXT: %[[D:.+]] = tile.max %[[C]], %[[X]] : <1x64xf32>
    %d = tile.max %c, %x : !tile.tile<1x64xf32>
    // CHECK-NEXT: %[[E:.+]] = tile.min %[[D]], %[[X]] : <1x64xf32>
    %e = tile.min %d, %x : !tile.tile<1x64xf32>
    // CHECK-NEXT: %[[F:.+]] = tile.neg %[[E]] : <1x64xf32>
    %f = tile.neg %e : !tile.tile<1x64xf32>
    // CHECK-NEXT: %[[G:.+]] = tile.exp %[[F]] : <1x64xf32>
    %g = tile.exp %f : !tile.tile<1x64xf32>
    // CHECK-NEXT: %[[H:.+]] = tile.exp2 %[[G]] : <1x64xf32>
    %h = tile.exp2 %g : !tile.tile<1x64xf32>
    // CHECK-NEXT: %[[K:.+]] = tile.log %[[H]] : <1x64xf32>
    %k = tile.log %h : !tile.tile<1x64xf32>
    // CHECK-NEXT: %[[L:.+]] = tile.sqrt %[[K]] : <1x64xf32>
    %l = tile.sqrt %k : !tile.tile<1x64xf32>
    // CHECK-NEXT: %[[M:.+]] = tile.rsqrt %[[L]] : <1x64xf32>
    %m = tile.rsqrt %l : !tile.tile<1x64xf32>
    // CHECK-NEXT: %[[N:.+]] = tile.tanh %[[M]] : <1x64xf32>
    %n = tile.tanh %m : !tile.tile<1x64xf32>
    // CHECK-NEXT: %[[O:.+]] = tile.sigmoid %[[N]] : <1x64xf32>
    %o = tile.sigmoid %n : !tile.tile<1x64xf32>
    // CHECK-NEXT: %[[P:.+]] = tile.gelu %[[O]] : <1x64xf32>
    %p = tile.gelu %o : !tile.tile<1x64xf32>
    // CHECK-NEXT: %[[Q:.+]] = tile.silu %[[P]] : <1x64xf32>
    %q = tile.silu %p : !tile.tile<1x64xf32>
    // CHECK-NEXT: %[[R:.+]] = tile.scale %[[Q]], 5.000000e-01 : <1x64xf32>
    %r = tile.scale %q, 0.5 : !tile.tile<1x64xf32>
    // CHECK-NEXT: %[[S:.+]] = tile.reduce_sum %[[R]] dim 1 : <1x64xf32> -> <1xf32>
    %s = tile.reduce_sum %r dim 1 : !tile.tile<1x64xf32> -> !tile.tile<1xf32>
    // CHECK-NEXT: %[[T:.+]] = tile.reduce_max %[[R]] dim 1 : <1x64xf32> -> <1xf32>
    %t = tile.reduce_max %r dim 1 : !tile.tile<1x64xf32> -> !tile.tile<1xf32>
    // CHECK-NEXT: %[[U:.+]] = tile.splat %M : index -> <1xf32>
    %u = tile.splat %M : index -> !tile.tile<1xf32>
    // CHECK-NEXT: %[[W:.+]] = tile.add %[[T]], %[[U]] : <1xf32>
    // CHECK-NEXT: %[[W2:.+]] = tile.add %[[W]], %[[S]] : <1xf32>
    %w = tile.add %t, %u : !tile.tile<1xf32>
    %w2 = tile.add %w, %s : !tile.tile<1xf32>
    // CHECK-NEXT: %[[BC:.+]] = tile.broadcast %[[W2]] [0] : <1xf32> -> <1x64xf32>
    %bc = tile.broadcast %w2 [0] : !tile.tile<1xf32> -> !tile.tile<1x64xf32>
    // CHECK-NEXT: %[[Y:.+]] = tile.cast %[[BC]] : <1x64xf32> -> <1x64xf16>
    %y = tile.cast %bc : !tile.tile<1x64xf32> -> !tile.tile<1x64xf16>
    // CHECK-NEXT: %[[VY:.+]] = tile.view %Y[%[[I]], %[[I]]] : <[M, 64], f16> -> <1x64xf16>
    %vy = tile.view %Y[%i, %i] : !tile.tensor<[M, 64], f16> -> !tile.view<1x64xf16>
    // CHECK-NEXT: tile.store %[[Y]], %[[VY]] : <1x64xf16>, <1x64xf16>
    tile.store %y, %vy : !tile.tile<1x64xf16>, !tile.view<1x64xf16>
  }
}

// Rank-3 tiles and a 3-d grid, constant tensor dims, a loop without carried values
// (its yield is implicit and not printed), default `stages 1`, an f32 splat, several
// carried values, extra attributes on grid/loop/kernel, and rank-3 reduce/broadcast.

// CHECK-LABEL: tile.kernel @structure(in %T: !tile.tensor<[B, 16, 0], f16>, out %U: !tile.tensor<[B, 16, 8], f32>) attributes {note = "kept"} {
tile.kernel @structure(in %T : !tile.tensor<[B, 16, 0], f16>, out %U : !tile.tensor<[B, 16, 8], f32>)
    attributes {note = "kept"} {
  // CHECK-NEXT: %B = tile.dim "B"
  %B = tile.dim "B"
  %c1 = arith.constant 1 : index
  // CHECK: tile.grid (%[[X:.+]], %[[Y:.+]], %[[Z:.+]]) in (%B, %c1, %c1) attributes {tag = 1 : i64} {
  tile.grid (%x, %y, %z) in (%B, %c1, %c1) attributes {tag = 1} {
    // CHECK-NEXT: tile.loop %{{.+}} to %c1 stages 1 {
    // CHECK-NEXT: }
    tile.loop %it to %c1 {
    }
    // CHECK-NEXT: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
    %one = arith.constant 1.0 : f32
    // CHECK-NEXT: %[[SP:.+]] = tile.splat %[[ONE]] : f32 -> <2x16x8xf32>
    %sp = tile.splat %one : f32 -> !tile.tile<2x16x8xf32>
    // CHECK-NEXT: %[[Z3:.+]] = tile.full -1.500000e+00 : <2x16x8xf16>
    %z3 = tile.full -1.5 : !tile.tile<2x16x8xf16>
    // CHECK-NEXT: %[[L:.+]]:2 = tile.loop %[[IT:.+]] to %c1 stages 2 carry(%[[P:.+]] = %[[SP]] : !tile.tile<2x16x8xf32>, %[[Q:.+]] = %[[Z3]] : !tile.tile<2x16x8xf16>) attributes {unroll = false} {
    // CHECK-NEXT: %[[V:.+]] = tile.view %T[%[[X]], %[[IT]], %[[Z]]] : <[B, 16, 0], f16> -> <2x16x8xf16>
    // CHECK-NEXT: %[[LD:.+]] = tile.load %[[V]] {padding = 1.000000e+00 : f64} : <2x16x8xf16> -> <2x16x8xf16>
    // CHECK-NEXT: tile.yield %[[P]], %[[LD]] : !tile.tile<2x16x8xf32>, !tile.tile<2x16x8xf16>
    // CHECK-NEXT: }
    %l:2 = tile.loop %it to %c1 stages 2 carry(%p = %sp : !tile.tile<2x16x8xf32>,
                                               %q = %z3 : !tile.tile<2x16x8xf16>)
        attributes {unroll = false} {
      %v = tile.view %T[%x, %it, %z] : !tile.tensor<[B, 16, 0], f16> -> !tile.view<2x16x8xf16>
      %ld = tile.load %v {padding = 1.0 : f64} : !tile.view<2x16x8xf16> -> !tile.tile<2x16x8xf16>
      tile.yield %p, %ld : !tile.tile<2x16x8xf32>, !tile.tile<2x16x8xf16>
    }
    // CHECK-NEXT: %[[RS:.+]] = tile.reduce_sum %[[L]]#1 dim 2 : <2x16x8xf16> -> <2x16xf16>
    %rs = tile.reduce_sum %l#1 dim 2 : !tile.tile<2x16x8xf16> -> !tile.tile<2x16xf16>
    // CHECK-NEXT: %[[RM:.+]] = tile.reduce_max %[[L]]#0 dim 0 : <2x16x8xf32> -> <16x8xf32>
    %rm = tile.reduce_max %l#0 dim 0 : !tile.tile<2x16x8xf32> -> !tile.tile<16x8xf32>
    // CHECK-NEXT: %[[B1:.+]] = tile.broadcast %[[RS]] [0, 1] : <2x16xf16> -> <2x16x8xf16>
    %b1 = tile.broadcast %rs [0, 1] : !tile.tile<2x16xf16> -> !tile.tile<2x16x8xf16>
    // CHECK-NEXT: %[[B2:.+]] = tile.broadcast %[[RM]] [1, 2] : <16x8xf32> -> <2x16x8xf32>
    %b2 = tile.broadcast %rm [1, 2] : !tile.tile<16x8xf32> -> !tile.tile<2x16x8xf32>
    // CHECK-NEXT: %[[CF:.+]] = tile.cast %[[B1]] : <2x16x8xf16> -> <2x16x8xf32>
    %cf = tile.cast %b1 : !tile.tile<2x16x8xf16> -> !tile.tile<2x16x8xf32>
    // CHECK-NEXT: %[[SUM:.+]] = tile.add %[[CF]], %[[B2]] : <2x16x8xf32>
    %sum = tile.add %cf, %b2 : !tile.tile<2x16x8xf32>
    // CHECK-NEXT: %[[VU:.+]] = tile.view %U[%[[X]], %[[Y]], %[[Z]]] : <[B, 16, 8], f32> -> <2x16x8xf32>
    %vu = tile.view %U[%x, %y, %z] : !tile.tensor<[B, 16, 8], f32> -> !tile.view<2x16x8xf32>
    // CHECK-NEXT: tile.store %[[SUM]], %[[VU]] : <2x16x8xf32>, <2x16x8xf32>
    tile.store %sum, %vu : !tile.tile<2x16x8xf32>, !tile.view<2x16x8xf32>
  }
}

// The implicit terminators are dropped by the custom printer; the generic form names them.
// RUN: kiln-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC
// GENERIC-LABEL: "tile.kernel"() <{arg_names = ["A", "B", "bias", "C"], outputs = array<i1: false, false, false, true>, sym_name = "gemm_bias_relu"}>
// GENERIC: "tile.yield"() : () -> ()
// GENERIC: "tile.return"() : () -> ()
// GENERIC-LABEL: "tile.kernel"() <{arg_names = ["X", "Y"], outputs = array<i1: false, true>, sym_name = "every_elementwise_op"}>
// GENERIC: "tile.load"(%{{.*}}) <{padding = 0xFFF0000000000000 : f64}>
// GENERIC: "tile.reduce_sum"(%{{.*}}) <{dim = 1 : i64}>
// GENERIC: "tile.broadcast"(%{{.*}}) <{dims = array<i64: 0>}>
// GENERIC-LABEL: "tile.kernel"() <{arg_names = ["T", "U"], outputs = array<i1: false, true>, sym_name = "structure"}>
// GENERIC: "tile.loop"(%{{.*}}) <{stages = 1 : i64}>
// GENERIC: "tile.loop"(%{{.*}}, %{{.*}}, %{{.*}}) <{stages = 2 : i64}> ({
// GENERIC-NEXT: ^bb0(%{{.*}}: index, %{{.*}}: !tile.tile<2x16x8xf32>, %{{.*}}: !tile.tile<2x16x8xf16>):

// -----
// Encodings (a backend's layouts) on tile types, and the explicit conversion between them.
// CHECK-LABEL: tile.kernel @encodings
tile.kernel @encodings(in %X : !tile.tensor<[N, N], f32>, out %Y : !tile.tensor<[N, N], f32>) {
  %n = tile.dim "N"
  tile.grid (%i, %j) in (%n, %n) {
    %v = tile.view %X[%i, %j] : !tile.tensor<[N, N], f32> -> !tile.view<32x32xf32>
    // CHECK: tile.load %{{.*}} : <32x32xf32> -> <32x32xf32, #tile.blocked>
    %x = tile.load %v : !tile.view<32x32xf32> -> !tile.tile<32x32xf32, #tile.blocked>
    // CHECK-NEXT: tile.convert_layout %{{.*}} : <32x32xf32, #tile.blocked> to <32x32xf32, #tile.mma<warps = [2, 2], frags = [1, 2]>>
    %m = tile.convert_layout %x : !tile.tile<32x32xf32, #tile.blocked> to !tile.tile<32x32xf32, #tile.mma<warps = [2, 2], frags = [1, 2]>>
    // CHECK-NEXT: tile.add %{{.*}}, %{{.*}} : <32x32xf32, #tile.mma<warps = [2, 2], frags = [1, 2]>>
    %s = tile.add %m, %m : !tile.tile<32x32xf32, #tile.mma<warps = [2, 2], frags = [1, 2]>>
    %w = tile.view %Y[%i, %j] : !tile.tensor<[N, N], f32> -> !tile.view<32x32xf32>
    tile.store %s, %w : !tile.tile<32x32xf32, #tile.mma<warps = [2, 2], frags = [1, 2]>>, !tile.view<32x32xf32>
  }
}

// The sm_90a twins' layouts, as attributes.
// CHECK-LABEL: func.func private @twin_layouts()
// CHECK-SAME: acc = #tile.wgmma<m = 64, n = 256>
// CHECK-SAME: b = #tile.nvmma_shared<swizzle = 128, major = "mn">
func.func private @twin_layouts() attributes {acc = #tile.wgmma<m = 64, n = 256>, b = #tile.nvmma_shared<swizzle = 128, major = "mn">}

// An output declared writable in place over an input keeps the pairs.
// CHECK-LABEL: tile.kernel @scale_in_place(in %X: !tile.tensor<[M, N], f32>, out %Y: !tile.tensor<[M, N], f32>) attributes {in_place = array<i64: 1, 0>} {
tile.kernel @scale_in_place(in %X : !tile.tensor<[M, N], f32>, out %Y : !tile.tensor<[M, N], f32>) attributes {in_place = array<i64: 1, 0>} {
}

// Masks and transposes: a causal mask over a transposed tile.
// CHECK-LABEL: tile.kernel @masks
tile.kernel @masks(in %X : !tile.tensor<[N, N], f32>, out %Y : !tile.tensor<[N, N], f32>) {
  %n = tile.dim "N"
  tile.grid (%i, %j) in (%n, %n) {
    %v = tile.view %X[%j, %i] : !tile.tensor<[N, N], f32> -> !tile.view<16x32xf32>
    %x = tile.load %v : !tile.view<16x32xf32> -> !tile.tile<16x32xf32>
    // CHECK: %[[T:.+]] = tile.transpose %{{.*}} : <16x32xf32> -> <32x16xf32>
    %t = tile.transpose %x : !tile.tile<16x32xf32> -> !tile.tile<32x16xf32>
    // CHECK-NEXT: %[[R:.+]] = tile.iota dim 0 : <32x16xf32>
    %r = tile.iota dim 0 : !tile.tile<32x16xf32>
    // CHECK-NEXT: %[[C:.+]] = tile.iota dim 1 : <32x16xf32>
    %c = tile.iota dim 1 : !tile.tile<32x16xf32>
    // CHECK-NEXT: %[[K:.+]] = tile.cmp "le", %[[C]], %[[R]] : <32x16xf32>
    %k = tile.cmp "le", %c, %r : !tile.tile<32x16xf32>
    %inf = tile.full 0xFF800000 : !tile.tile<32x16xf32>
    // CHECK: tile.select %[[K]], %[[T]], %{{.*}} : <32x16xf32>
    %s = tile.select %k, %t, %inf : !tile.tile<32x16xf32>
    %w = tile.view %Y[%i, %j] : !tile.tensor<[N, N], f32> -> !tile.view<32x16xf32>
    tile.store %s, %w : !tile.tile<32x16xf32>, !tile.view<32x16xf32>
  }
}

// A view of fewer dims than its tensor: the leading indices are element indices.
// CHECK-LABEL: tile.kernel @leading
// CHECK: tile.view %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : <[B, M, N], f32> -> <4x8xf32>
tile.kernel @leading(in %X : !tile.tensor<[B, M, N], f32>, out %Y : !tile.tensor<[B, M, N], f32>) {
  %b = tile.dim "B"
  tile.grid (%n) in (%b) {
    %c0 = arith.constant 0 : index
    %v = tile.view %X[%n, %c0, %c0] : !tile.tensor<[B, M, N], f32> -> !tile.view<4x8xf32>
    %x = tile.load %v : !tile.view<4x8xf32> -> !tile.tile<4x8xf32>
    %w = tile.view %Y[%n, %c0, %c0] : !tile.tensor<[B, M, N], f32> -> !tile.view<4x8xf32>
    tile.store %x, %w : !tile.tile<4x8xf32>, !tile.view<4x8xf32>
  }
}

// An i32 input read an element at a time, as an index.
// CHECK-LABEL: tile.kernel @read_length(in %Lens: !tile.tensor<[B], i32>, out %Y: !tile.tensor<[B], f32>) {
tile.kernel @read_length(in %Lens : !tile.tensor<[B], i32>, out %Y : !tile.tensor<[B], f32>) {
  %B = tile.dim "B"
  tile.grid (%b) in (%B) {
    // CHECK: %[[N:.+]] = tile.read %Lens[%{{.+}}] : <[B], i32>
    %n = tile.read %Lens[%b] : !tile.tensor<[B], i32>
    %t = tile.splat %n : index -> !tile.tile<1xf32>
    %v = tile.view %Y[%b] : !tile.tensor<[B], f32> -> !tile.view<1xf32>
    tile.store %t, %v : !tile.tile<1xf32>, !tile.view<1xf32>
  }
}

// tile.view with a window: dim 1 narrowed to [%at, %at + %len); the tile indices count from %at.
// CHECK-LABEL: tile.kernel @packed_rows
tile.kernel @packed_rows(in %X : !tile.tensor<[H, T, 32], f32>, in %Off : !tile.tensor<[B], i32>,
                         out %Y : !tile.tensor<[H, T, 32], f32>) {
  %H = tile.dim "H"
  %c0 = arith.constant 0 : index
  tile.grid (%h) in (%H) {
    %at = tile.read %Off[%c0] : !tile.tensor<[B], i32>
    %len = tile.read %Off[%h] : !tile.tensor<[B], i32>
    // CHECK: tile.view %X[%{{.+}}, %{{.+}}, %{{.+}}] window(%{{.+}}, %{{.+}}) along 1 : <[H, T, 32], f32> -> <16x32xf32>
    %v = tile.view %X[%h, %c0, %c0] window(%at, %len) along 1 : !tile.tensor<[H, T, 32], f32> -> !tile.view<16x32xf32>
    %t = tile.load %v : !tile.view<16x32xf32> -> !tile.tile<16x32xf32>
    %w = tile.view %Y[%h, %c0, %c0] window(%at, %len) along 1 : !tile.tensor<[H, T, 32], f32> -> !tile.view<16x32xf32>
    tile.store %t, %w : !tile.tile<16x32xf32>, !tile.view<16x32xf32>
  }
}
