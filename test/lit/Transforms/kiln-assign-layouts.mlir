// RUN: kiln-opt %s --split-input-file --kiln-assign-layouts="num-warps=4" | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kiln-assign-layouts="num-warps=8" | FileCheck %s --check-prefix=W8
// RUN: kiln-opt %s --split-input-file --kiln-assign-layouts="num-warps=4" | kiln-opt --split-input-file --kiln-lower-to-gpu="num-warps=4" | FileCheck %s --check-prefix=LOWERED
// RUN: kiln-opt %s --split-input-file --kiln-assign-layouts="num-warps=8" | not kiln-opt --split-input-file --kiln-lower-to-gpu="num-warps=4" 2>&1 | FileCheck %s --check-prefix=MISMATCH

// The layouts of a bf16 GEMM tile with an epilogue, as encodings on the tile types: the dot
// runs on the tensor cores, so the loop carries its accumulator in the mma layout (its zero
// start converted explicitly, which is free for a constant) and the cast stays in it; the
// loads feeding the dot are blocked. The f32 dot below runs as SIMT code: blocked.

// CHECK-LABEL: tile.kernel @mm
// CHECK: %[[Z:.+]] = tile.full 0.000000e+00 : <64x64xf32>
// CHECK-NEXT: %[[Z2:.+]] = tile.convert_layout %[[Z]] : <64x64xf32> to <64x64xf32, #tile.mma<warps = [2, 2], frags = [2, 4]>>
// CHECK-NEXT: tile.loop {{.*}} carry(%{{.*}} = %[[Z2]] : !tile.tile<64x64xf32, #tile.mma<warps = [2, 2], frags = [2, 4]>>)
// CHECK: tile.load {{.*}} -> <64x32xbf16, #tile.blocked>
// CHECK: tile.dot {{.*}} -> <64x64xf32, #tile.mma<warps = [2, 2], frags = [2, 4]>>
// CHECK: tile.cast {{.*}} -> <64x64xbf16, #tile.mma<warps = [2, 2], frags = [2, 4]>>
// W8: tile.loop {{.*}} !tile.tile<64x64xf32, #tile.mma<warps = [2, 4], frags = [2, 2]>>
// W8: tile.dot {{.*}} -> <64x64xf32, #tile.mma<warps = [2, 4], frags = [2, 2]>>
// LOWERED: gpu.func @mm
// LOWERED: mma.sync
// MISMATCH: op has a layout for 8 warps, but the kernel is lowered with 4 (run kiln-assign-layouts with the same num-warps)
module {
  tile.kernel @mm(in %A: !tile.tensor<[M, K], bf16>, in %B: !tile.tensor<[K, N], bf16>, out %C: !tile.tensor<[M, N], bf16>) {
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
      %acc = tile.loop %kk to %kt stages 2 carry(%c = %z : !tile.tile<64x64xf32>) {
        %va = tile.view %A[%i, %kk] : <[M, K], bf16> -> <64x32xbf16>
        %a = tile.load %va : <64x32xbf16> -> <64x32xbf16>
        %vb = tile.view %B[%kk, %j] : <[K, N], bf16> -> <32x64xbf16>
        %b = tile.load %vb : <32x64xbf16> -> <32x64xbf16>
        %d = tile.dot %a, %b, %c : <64x32xbf16>, <32x64xbf16> -> <64x64xf32>
        tile.yield %d : !tile.tile<64x64xf32>
      }
      %vc = tile.view %C[%i, %j] : <[M, N], bf16> -> <64x64xbf16>
      %o = tile.cast %acc : <64x64xf32> -> <64x64xbf16>
      tile.store %o, %vc : <64x64xbf16>, <64x64xbf16>
    }
  }
}

// -----

// CHECK-LABEL: tile.kernel @simt
// CHECK: tile.loop {{.*}} carry(%{{.*}} : !tile.tile<16x16xf32, #tile.blocked>)
// CHECK: tile.dot {{.*}} -> <16x16xf32, #tile.blocked>
module {
  tile.kernel @simt(in %A: !tile.tensor<[M, K], f32>, in %B: !tile.tensor<[K, N], f32>, out %C: !tile.tensor<[M, N], f32>) {
    %M = tile.dim "M"
    %N = tile.dim "N"
    %K = tile.dim "K"
    %c16 = arith.constant 16 : index
    %gm = arith.ceildivsi %M, %c16 : index
    %gn = arith.ceildivsi %N, %c16 : index
    tile.grid (%i, %j) in (%gm, %gn) {
      %kt = arith.ceildivsi %K, %c16 : index
      %z = tile.full 0.000000e+00 : <16x16xf32>
      %acc = tile.loop %kk to %kt stages 1 carry(%c = %z : !tile.tile<16x16xf32>) {
        %va = tile.view %A[%i, %kk] : <[M, K], f32> -> <16x16xf32>
        %a = tile.load %va : <16x16xf32> -> <16x16xf32>
        %vb = tile.view %B[%kk, %j] : <[K, N], f32> -> <16x16xf32>
        %b = tile.load %vb : <16x16xf32> -> <16x16xf32>
        %d = tile.dot %a, %b, %c : <16x16xf32>, <16x16xf32> -> <16x16xf32>
        tile.yield %d : !tile.tile<16x16xf32>
      }
      %vc = tile.view %C[%i, %j] : <[M, N], f32> -> <16x16xf32>
      tile.store %acc, %vc : <16x16xf32>, <16x16xf32>
    }
  }
}

// -----

// A bias row meets the mma accumulator: the broadcast is blocked and converted to the
// accumulator's layout right before the add (through shared memory, once lowered); the
// ReLU's zero is a constant and converts for free.
// CHECK-LABEL: tile.kernel @bias
// CHECK: %[[BC:.+]] = tile.broadcast {{.*}} -> <64x64xf32, #tile.blocked>
// CHECK-NEXT: %[[BM:.+]] = tile.convert_layout %[[BC]] : <64x64xf32, #tile.blocked> to <64x64xf32, #tile.mma<warps = [2, 2], frags = [2, 4]>>
// CHECK-NEXT: tile.add %{{.*}}, %[[BM]] : <64x64xf32, #tile.mma<warps = [2, 2], frags = [2, 4]>>
// CHECK: tile.convert_layout %{{.*}} : <64x64xf32> to <64x64xf32, #tile.mma<warps = [2, 2], frags = [2, 4]>>
// CHECK-NEXT: tile.max
module {
  tile.kernel @bias(in %A: !tile.tensor<[M, K], bf16>, in %B: !tile.tensor<[K, N], bf16>, in %bias: !tile.tensor<[N], f32>, out %C: !tile.tensor<[M, N], f32>) {
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
      %acc = tile.loop %kk to %kt stages 2 carry(%c = %z : !tile.tile<64x64xf32>) {
        %va = tile.view %A[%i, %kk] : <[M, K], bf16> -> <64x32xbf16>
        %a = tile.load %va : <64x32xbf16> -> <64x32xbf16>
        %vb = tile.view %B[%kk, %j] : <[K, N], bf16> -> <32x64xbf16>
        %b = tile.load %vb : <32x64xbf16> -> <32x64xbf16>
        %d = tile.dot %a, %b, %c : <64x32xbf16>, <32x64xbf16> -> <64x64xf32>
        tile.yield %d : !tile.tile<64x64xf32>
      }
      %vbias = tile.view %bias[%j] : <[N], f32> -> <64xf32>
      %bias1 = tile.load %vbias : <64xf32> -> <64xf32>
      %bc = tile.broadcast %bias1 [1] : <64xf32> -> <64x64xf32>
      %s = tile.add %acc, %bc : <64x64xf32>
      %zero = tile.full 0.000000e+00 : <64x64xf32>
      %r = tile.max %s, %zero : <64x64xf32>
      %vc = tile.view %C[%i, %j] : <[M, N], f32> -> <64x64xf32>
      tile.store %r, %vc : <64x64xf32>, <64x64xf32>
    }
  }
}

// -----

// A mask made from tile.iota, over a dot's result, is made again in the dot's mma layout
// (computed from each thread's own coordinates, not moved through shared memory), and the
// blocked original is erased.
// CHECK-LABEL: tile.kernel @mask
// CHECK-NOT: tile.iota {{.*}}#tile.blocked
// CHECK: %[[C:.+]] = tile.iota dim 1 : <32x32xf32, #tile.mma<warps = [2, 2], frags = [1, 2]>>
// CHECK: %[[R:.+]] = tile.iota dim 0 : <32x32xf32, #tile.mma<warps = [2, 2], frags = [1, 2]>>
// CHECK: %[[K:.+]] = tile.cmp "le", %[[C]], %[[R]] : <32x32xf32, #tile.mma<warps = [2, 2], frags = [1, 2]>>
// CHECK-NOT: tile.convert_layout {{.*}}#tile.blocked> to
// CHECK: tile.select %[[K]], %{{.*}}, %{{.*}} : <32x32xf32, #tile.mma<warps = [2, 2], frags = [1, 2]>>
// CHECK-NOT: tile.iota
tile.kernel @mask(in %A: !tile.tensor<[M, K], bf16>, in %B: !tile.tensor<[K, N], bf16>, out %C: !tile.tensor<[M, N], f32>) {
  %M = tile.dim "M"
  %N = tile.dim "N"
  tile.grid (%i, %j) in (%M, %N) {
    %va = tile.view %A[%i, %j] : <[M, K], bf16> -> <32x32xbf16>
    %a = tile.load %va : <32x32xbf16> -> <32x32xbf16>
    %vb = tile.view %B[%i, %j] : <[K, N], bf16> -> <32x32xbf16>
    %b = tile.load %vb : <32x32xbf16> -> <32x32xbf16>
    %z = tile.full 0.000000e+00 : <32x32xf32>
    %d = tile.dot %a, %b, %z : <32x32xbf16>, <32x32xbf16> -> <32x32xf32>
    %c = tile.iota dim 1 : <32x32xf32>
    %r = tile.iota dim 0 : <32x32xf32>
    %k = tile.cmp "le", %c, %r : <32x32xf32>
    %inf = tile.full 0xFF800000 : <32x32xf32>
    %s = tile.select %k, %d, %inf : <32x32xf32>
    %vc = tile.view %C[%i, %j] : <[M, N], f32> -> <32x32xf32>
    tile.store %s, %vc : <32x32xf32>, <32x32xf32>
  }
}

// -----

// A mask with two users is made again for each and its original erased once.
// CHECK-LABEL: tile.kernel @mask_twice
// CHECK-COUNT-2: tile.cmp "le", %{{.*}}, %{{.*}} : <32x32xf32, #tile.mma<warps = [2, 2], frags = [1, 2]>>
// CHECK-NOT: tile.cmp
tile.kernel @mask_twice(in %A: !tile.tensor<[M, K], bf16>, in %B: !tile.tensor<[K, N], bf16>, out %C: !tile.tensor<[M, N], f32>) {
  %M = tile.dim "M"
  %N = tile.dim "N"
  tile.grid (%i, %j) in (%M, %N) {
    %va = tile.view %A[%i, %j] : <[M, K], bf16> -> <32x32xbf16>
    %a = tile.load %va : <32x32xbf16> -> <32x32xbf16>
    %vb = tile.view %B[%i, %j] : <[K, N], bf16> -> <32x32xbf16>
    %b = tile.load %vb : <32x32xbf16> -> <32x32xbf16>
    %z = tile.full 0.000000e+00 : <32x32xf32>
    %d = tile.dot %a, %b, %z : <32x32xbf16>, <32x32xbf16> -> <32x32xf32>
    %e = tile.dot %a, %b, %d : <32x32xbf16>, <32x32xbf16> -> <32x32xf32>
    %c = tile.iota dim 1 : <32x32xf32>
    %r = tile.iota dim 0 : <32x32xf32>
    %k = tile.cmp "le", %c, %r : <32x32xf32>
    %inf = tile.full 0xFF800000 : <32x32xf32>
    %s = tile.select %k, %d, %inf : <32x32xf32>
    %t = tile.select %k, %e, %s : <32x32xf32>
    %vc = tile.view %C[%i, %j] : <[M, N], f32> -> <32x32xf32>
    tile.store %t, %vc : <32x32xf32>, <32x32xf32>
  }
}

// -----

// Attention's loop: both products work on rows (the scores are reduced along rows, the
// output's accumulator is scaled by a row broadcast), so each keeps its rows in one warp
// (warps [4, 1]); the row max and sum are rank-1 tiles in the rows of the scores' layout,
// and so are the loop's carried max and sum; broadcast back, they are mma tiles with the
// output's column fragments. Nothing that varies is converted inside the loop (only the
// uniform zero, which costs nothing).
// CHECK-LABEL: tile.kernel @rows
// CHECK: tile.loop {{.*}} carry(%{{.*}} = %{{.*}} : !tile.tile<64xf32, #tile.mma<warps = [4, 1], frags = [1, 8]>>, %{{.*}} = %{{.*}} : !tile.tile<64x64xf32, #tile.mma<warps = [4, 1], frags = [1, 8]>>)
// CHECK-NOT: tile.convert_layout {{.*}}#tile.{{.*}} to
// CHECK: tile.dot {{.*}} -> <64x64xf32, #tile.mma<warps = [4, 1], frags = [1, 8]>>
// CHECK: tile.reduce_max {{.*}} -> <64xf32, #tile.mma<warps = [4, 1], frags = [1, 8]>>
// CHECK: tile.broadcast {{.*}} -> <64x64xf32, #tile.mma<warps = [4, 1], frags = [1, 8]>>
// CHECK: tile.dot {{.*}} -> <64x64xf32, #tile.mma<warps = [4, 1], frags = [1, 8]>>
// CHECK: tile.yield
// At 8 warps, 64 rows cannot give each warp whole rows: the squarest split stays, and the
// row max is still in its rows layout (the warps along N fold through shared memory).
// W8-LABEL: tile.kernel @rows
// W8: tile.reduce_max {{.*}} -> <64xf32, #tile.mma<warps = [2, 4], frags = [2, 2]>>
// Lowered: the row max by shuffles in the quads, nothing of f32 through shared memory between
// the products (V, read by both, is staged for each from its registers).
// LOWERED-LABEL: gpu.func @rows
// LOWERED: scf.for
// LOWERED: nvvm.mma.sync
// LOWERED: gpu.shuffle  xor %{{.*}}, %c2_i32
// LOWERED: gpu.shuffle  xor %{{.*}}, %c1_i32
// LOWERED-NOT: memref.store {{.*}} : memref<{{[0-9]+}}xf32, #gpu.address_space<workgroup>>
// LOWERED: nvvm.mma.sync
// LOWERED: scf.yield
tile.kernel @rows(in %Q: !tile.tensor<[S, 64], bf16>, in %V: !tile.tensor<[S, 64], bf16>, out %O: !tile.tensor<[S, 64], f32>) {
  %S = tile.dim "S"
  %c64 = arith.constant 64 : index
  %n = arith.ceildivsi %S, %c64 : index
  tile.grid (%i) in (%n) {
    %c0 = arith.constant 0 : index
    %vq = tile.view %Q[%i, %c0] : <[S, 64], bf16> -> <64x64xbf16>
    %q = tile.load %vq : <64x64xbf16> -> <64x64xbf16>
    %m0 = tile.full 0xFF800000 : <64xf32>
    %o0 = tile.full 0.000000e+00 : <64x64xf32>
    %r:2 = tile.loop %j to %n stages 1 carry(%m = %m0 : !tile.tile<64xf32>, %o = %o0 : !tile.tile<64x64xf32>) {
      %vv = tile.view %V[%j, %c0] : <[S, 64], bf16> -> <64x64xbf16>
      %v = tile.load %vv : <64x64xbf16> -> <64x64xbf16>
      %z = tile.full 0.000000e+00 : <64x64xf32>
      %s = tile.dot %q, %v, %z : <64x64xbf16>, <64x64xbf16> -> <64x64xf32>
      %rm = tile.reduce_max %s dim 1 : <64x64xf32> -> <64xf32>
      %mn = tile.max %m, %rm : <64xf32>
      %b = tile.broadcast %mn [0] : <64xf32> -> <64x64xf32>
      %p = tile.sub %s, %b : <64x64xf32>
      %pb = tile.cast %p : <64x64xf32> -> <64x64xbf16>
      %ob = tile.mul %o, %b : <64x64xf32>
      %on = tile.dot %pb, %v, %ob : <64x64xbf16>, <64x64xbf16> -> <64x64xf32>
      tile.yield %mn, %on : !tile.tile<64xf32>, !tile.tile<64x64xf32>
    }
    %vo = tile.view %O[%i, %c0] : <[S, 64], f32> -> <64x64xf32>
    tile.store %r#1, %vo : <64x64xf32>, <64x64xf32>
  }
}
