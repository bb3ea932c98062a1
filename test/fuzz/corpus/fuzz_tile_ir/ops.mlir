tile.kernel @gemm_bias_relu(in %A : !tile.tensor<[M, K], bf16>, in %B : !tile.tensor<[K, N], bf16>,
                            in %bias : !tile.tensor<[N], bf16>, out %C : !tile.tensor<[M, N], bf16>) {
  %M = tile.dim "M"
  %N = tile.dim "N"
  %K = tile.dim "K"
  %c32 = arith.constant 32 : index
  %c16 = arith.constant 16 : index
  %gm = arith.ceildivsi %M, %c32 : index
  %gn = arith.ceildivsi %N, %c32 : index
  %gk = arith.ceildivsi %K, %c16 : index
  tile.grid (%i, %j) in (%gm, %gn) {
    %z = tile.full 0.0 : !tile.tile<32x32xf32>
    %acc = tile.loop %kk to %gk stages 3 carry(%c = %z : !tile.tile<32x32xf32>) {
      %va = tile.view %A[%i, %kk] : !tile.tensor<[M, K], bf16> -> !tile.view<32x16xbf16>
      %vb = tile.view %B[%kk, %j] : !tile.tensor<[K, N], bf16> -> !tile.view<16x32xbf16>
      %a = tile.load %va : !tile.view<32x16xbf16> -> !tile.tile<32x16xbf16>
      %b = tile.load %vb : !tile.view<16x32xbf16> -> !tile.tile<16x32xbf16>
      %d = tile.dot %a, %b, %c : !tile.tile<32x16xbf16>, !tile.tile<16x32xbf16> -> !tile.tile<32x32xf32>
      tile.yield %d : !tile.tile<32x32xf32>
    }
    %vbias = tile.view %bias[%j] : !tile.tensor<[N], bf16> -> !tile.view<32xbf16>
    %bias16 = tile.load %vbias : !tile.view<32xbf16> -> !tile.tile<32xbf16>
    %bias32 = tile.cast %bias16 : !tile.tile<32xbf16> -> !tile.tile<32xf32>
    %row = tile.broadcast %bias32 [1] : !tile.tile<32xf32> -> !tile.tile<32x32xf32>
    %s = tile.add %acc, %row : !tile.tile<32x32xf32>
    %r = tile.relu %s : !tile.tile<32x32xf32>
    %o = tile.cast %r : !tile.tile<32x32xf32> -> !tile.tile<32x32xbf16>
    %vc = tile.view %C[%i, %j] : !tile.tensor<[M, N], bf16> -> !tile.view<32x32xbf16>
    tile.store %o, %vc : !tile.tile<32x32xbf16>, !tile.view<32x32xbf16>
  }
}

tile.kernel @every_elementwise_op(in %X : !tile.tensor<[M, 64], f32>, out %Y : !tile.tensor<[M, 64], f16>) {
  %M = tile.dim "M"
  tile.grid (%i) in (%M) {
    %v = tile.view %X[%i, %i] : !tile.tensor<[M, 64], f32> -> !tile.view<1x64xf32>
    %x = tile.load %v {padding = 0xFFF0000000000000 : f64} : !tile.view<1x64xf32> -> !tile.tile<1x64xf32>
    %a = tile.sub %x, %x : !tile.tile<1x64xf32>
    %b = tile.mul %a, %x : !tile.tile<1x64xf32>
    %c = tile.div %b, %x : !tile.tile<1x64xf32>
    %d = tile.max %c, %x : !tile.tile<1x64xf32>
    %e = tile.min %d, %x : !tile.tile<1x64xf32>
    %f = tile.neg %e : !tile.tile<1x64xf32>
    %g = tile.exp %f : !tile.tile<1x64xf32>
    %h = tile.exp2 %g : !tile.tile<1x64xf32>
    %k = tile.log %h : !tile.tile<1x64xf32>
    %l = tile.sqrt %k : !tile.tile<1x64xf32>
    %m = tile.rsqrt %l : !tile.tile<1x64xf32>
    %n = tile.tanh %m : !tile.tile<1x64xf32>
    %o = tile.sigmoid %n : !tile.tile<1x64xf32>
    %p = tile.gelu %o : !tile.tile<1x64xf32>
    %q = tile.silu %p : !tile.tile<1x64xf32>
    %r = tile.scale %q, 0.5 : !tile.tile<1x64xf32>
    %s = tile.reduce_sum %r dim 1 : !tile.tile<1x64xf32> -> !tile.tile<1xf32>
    %t = tile.reduce_max %r dim 1 : !tile.tile<1x64xf32> -> !tile.tile<1xf32>
    %u = tile.splat %M : index -> !tile.tile<1xf32>
    %w = tile.add %t, %u : !tile.tile<1xf32>
    %w2 = tile.add %w, %s : !tile.tile<1xf32>
    %bc = tile.broadcast %w2 [0] : !tile.tile<1xf32> -> !tile.tile<1x64xf32>
    %y = tile.cast %bc : !tile.tile<1x64xf32> -> !tile.tile<1x64xf16>
    %vy = tile.view %Y[%i, %i] : !tile.tensor<[M, 64], f16> -> !tile.view<1x64xf16>
    tile.store %y, %vy : !tile.tile<1x64xf16>, !tile.view<1x64xf16>
  }
}


tile.kernel @structure(in %T : !tile.tensor<[B, 16, 0], f16>, out %U : !tile.tensor<[B, 16, 8], f32>)
    attributes {note = "kept"} {
  %B = tile.dim "B"
  %c1 = arith.constant 1 : index
  tile.grid (%x, %y, %z) in (%B, %c1, %c1) attributes {tag = 1} {
    tile.loop %it to %c1 {
    }
    %one = arith.constant 1.0 : f32
    %sp = tile.splat %one : f32 -> !tile.tile<2x16x8xf32>
    %z3 = tile.full -1.5 : !tile.tile<2x16x8xf16>
    %l:2 = tile.loop %it to %c1 stages 2 carry(%p = %sp : !tile.tile<2x16x8xf32>,
                                               %q = %z3 : !tile.tile<2x16x8xf16>)
        attributes {unroll = false} {
      %v = tile.view %T[%x, %it, %z] : !tile.tensor<[B, 16, 0], f16> -> !tile.view<2x16x8xf16>
      %ld = tile.load %v {padding = 1.0 : f64} : !tile.view<2x16x8xf16> -> !tile.tile<2x16x8xf16>
      tile.yield %p, %ld : !tile.tile<2x16x8xf32>, !tile.tile<2x16x8xf16>
    }
    %rs = tile.reduce_sum %l#1 dim 2 : !tile.tile<2x16x8xf16> -> !tile.tile<2x16xf16>
    %rm = tile.reduce_max %l#0 dim 0 : !tile.tile<2x16x8xf32> -> !tile.tile<16x8xf32>
    %b1 = tile.broadcast %rs [0, 1] : !tile.tile<2x16xf16> -> !tile.tile<2x16x8xf16>
    %b2 = tile.broadcast %rm [1, 2] : !tile.tile<16x8xf32> -> !tile.tile<2x16x8xf32>
    %cf = tile.cast %b1 : !tile.tile<2x16x8xf16> -> !tile.tile<2x16x8xf32>
    %sum = tile.add %cf, %b2 : !tile.tile<2x16x8xf32>
    %vu = tile.view %U[%x, %y, %z] : !tile.tensor<[B, 16, 8], f32> -> !tile.view<2x16x8xf32>
    tile.store %sum, %vu : !tile.tile<2x16x8xf32>, !tile.view<2x16x8xf32>
  }
}


tile.kernel @encodings(in %X : !tile.tensor<[N, N], f32>, out %Y : !tile.tensor<[N, N], f32>) {
  %n = tile.dim "N"
  tile.grid (%i, %j) in (%n, %n) {
    %v = tile.view %X[%i, %j] : !tile.tensor<[N, N], f32> -> !tile.view<32x32xf32>
    %x = tile.load %v : !tile.view<32x32xf32> -> !tile.tile<32x32xf32, #tile.blocked>
    %m = tile.convert_layout %x : !tile.tile<32x32xf32, #tile.blocked> to !tile.tile<32x32xf32, #tile.mma<warps = [2, 2], frags = [1, 2]>>
    %s = tile.add %m, %m : !tile.tile<32x32xf32, #tile.mma<warps = [2, 2], frags = [1, 2]>>
    %w = tile.view %Y[%i, %j] : !tile.tensor<[N, N], f32> -> !tile.view<32x32xf32>
    tile.store %s, %w : !tile.tile<32x32xf32, #tile.mma<warps = [2, 2], frags = [1, 2]>>, !tile.view<32x32xf32>
  }
}

func.func private @twin_layouts() attributes {acc = #tile.wgmma<m = 64, n = 256>, b = #tile.nvmma_shared<swizzle = 128, major = "mn">}
