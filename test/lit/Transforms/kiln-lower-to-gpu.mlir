// RUN: kiln-opt %s --kiln-lower-to-gpu="num-warps=2" | FileCheck %s

// A bf16 GEMM tile whose shapes fit the tensor cores: one CTA per grid index, 64 threads,
// the accumulator carried in mma layout, operands copied global -> shared with cp.async
// in a 2-stage software pipeline.

// CHECK: module attributes {gpu.container_module}
// CHECK: gpu.module @kiln
// CHECK: gpu.func @mm(%{{.*}}: memref<?x?xbf16, strided<[?, ?], offset: ?>, #gpu.address_space<global>>
// CHECK-SAME: kernel
// Two pipeline stages of A (32x16 bf16) and B (16x16 bf16), their 32-byte rows padded to 48
// (ldmatrix reads 8 rows at one column: padded, they fall in 8 different bank groups):
// 1.5 KiB + 768 B a stage.
// CHECK-SAME: kiln.shared_bytes = 4608 : i64, kiln.threads = 64 : i64
// CHECK-SAME: known_block_size = array<i32: 64, 1, 1>
// CHECK: gpu.thread_id  x
// CHECK: gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK: gpu.block_id  x
// CHECK: gpu.block_id  y
// Whether both operands' rows allow 16-byte copies is decided per launch (strides are
// launch values): then the pipelined loop, else the plain one.
// CHECK: memref.extract_strided_metadata %arg0
// CHECK: memref.extract_strided_metadata %arg1
// CHECK: scf.if %{{.*}} -> (f32, f32, f32, f32, f32, f32, f32, f32) {
// Prologue: stages-1 iterations' copies in flight, one commit group each.
// CHECK: gpu.barrier
// CHECK: nvgpu.device_async_copy {{.*}}, 8, %{{.*}} : memref<?x?xbf16, strided<[?, 1], offset: ?>, #gpu.address_space<global>> to memref<768xbf16, #gpu.address_space<workgroup>>
// CHECK: nvvm.cp.async.commit.group
// The k loop carries 2 fragments x 4 f32 per thread: 32x16 over 2 warps of 16x16.
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32)
// CHECK-NEXT: nvvm.cp.async.wait.group 0
// CHECK-NEXT: gpu.barrier
// CHECK: nvgpu.device_async_copy
// CHECK: nvvm.cp.async.commit.group
// Fragments come from the stage's buffers with nvvm.ldmatrix (x4 transposed, "col", for two
// 16x8 fragments of B at once; x4 for A), then nvvm.mma.sync m16n8k16 row x col on bf16 pairs.
// CHECK: nvvm.ldmatrix %{{.*}} {eltType = #nvvm.ld_st_matrix_elt_type<b16>, layout = #nvvm.mma_layout<col>, num = 4 : i32, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>} : (!llvm.ptr<3>) -> !llvm.struct<(i32, i32, i32, i32)>
// CHECK: nvvm.ldmatrix %{{.*}} {eltType = #nvvm.ld_st_matrix_elt_type<b16>, layout = #nvvm.mma_layout<row>, num = 4 : i32, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>} : (!llvm.ptr<3>) -> !llvm.struct<(i32, i32, i32, i32)>
// CHECK-COUNT-2: nvvm.mma.sync A[{{.*}}]  B[{{.*}}]  C[{{.*}}]  {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>}
// CHECK-NOT: llvm.inline_asm
// CHECK: nvvm.cp.async.wait.group 0
// CHECK-NEXT: gpu.barrier
// CHECK: } else {
// The plain loop: each operand in a two-slot ring, iteration j + 1's copies (cp.async when
// aligned, else masked element copies) issued before waiting for iteration j's: one commit
// group per iteration, the ring's first copies before the loop, the last drained after it.
// CHECK: gpu.barrier
// CHECK: nvvm.cp.async.commit.group
// CHECK: scf.for
// CHECK-NEXT: arith.constant 1
// CHECK-NEXT: arith.addi
// CHECK-NEXT: gpu.barrier
// CHECK: scf.if %{{.*}} -> (bf16)
// CHECK: nvvm.cp.async.commit.group
// CHECK-NEXT: nvvm.cp.async.wait.group 1
// CHECK-NEXT: gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.mma.sync
// CHECK: scf.yield
// CHECK: nvvm.cp.async.wait.group 0
// CHECK-NEXT: gpu.barrier
// The mma accumulator is stored two adjacent columns at a time where C's rows allow it
// (checked per launch), element by element otherwise; only where the tile is inside C.
// CHECK: vector.store %{{.*}} : memref<?x?xf32, strided<[?, 1], offset: ?>, #gpu.address_space<global>>, vector<2xf32>
// CHECK: memref.store %{{.*}} : memref<?x?xf32, strided<[?, ?], offset: ?>, #gpu.address_space<global>>
// CHECK: gpu.return
// CHECK-NOT: tile.
tile.kernel @mm(in %A : !tile.tensor<[M, K], bf16>, in %B : !tile.tensor<[K, N], bf16>, out %C : !tile.tensor<[M, N], f32>) {
  %M = tile.dim "M"
  %N = tile.dim "N"
  %K = tile.dim "K"
  %c32 = arith.constant 32 : index
  %c16 = arith.constant 16 : index
  %gm = arith.ceildivsi %M, %c32 : index
  %gn = arith.ceildivsi %N, %c16 : index
  %gk = arith.ceildivsi %K, %c16 : index
  tile.grid (%i, %j) in (%gm, %gn) {
    %z = tile.full 0.0 : !tile.tile<32x16xf32>
    %acc = tile.loop %kk to %gk stages 2 carry(%c = %z : !tile.tile<32x16xf32>) {
      %va = tile.view %A[%i, %kk] : !tile.tensor<[M, K], bf16> -> !tile.view<32x16xbf16>
      %vb = tile.view %B[%kk, %j] : !tile.tensor<[K, N], bf16> -> !tile.view<16x16xbf16>
      %a = tile.load %va : !tile.view<32x16xbf16> -> !tile.tile<32x16xbf16>
      %b = tile.load %vb : !tile.view<16x16xbf16> -> !tile.tile<16x16xbf16>
      %d = tile.dot %a, %b, %c : !tile.tile<32x16xbf16>, !tile.tile<16x16xbf16> -> !tile.tile<32x16xf32>
      tile.yield %d : !tile.tile<32x16xf32>
    }
    %vc = tile.view %C[%i, %j] : !tile.tensor<[M, N], f32> -> !tile.view<32x16xf32>
    tile.store %acc, %vc : !tile.tile<32x16xf32>, !tile.view<32x16xf32>
  }
}

// Exchanges through shared memory are fenced: a reduction writes its partials to the scratch
// between two barriers, reads them back after the second; the broadcast that follows writes
// the scratch again only after another barrier (so no thread still reads the first use).

// CHECK-LABEL: gpu.func @rowmax
// CHECK-SAME: kiln.shared_bytes = 16 : i64, kiln.threads = 64 : i64
// The reduce folds each of a thread's two rows (of 4x32, over 64 threads: one row per warp
// and slot) across the warp's lanes by shuffles ...
// CHECK: memref.view {{.*}} to memref<4xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: gpu.barrier
// CHECK: gpu.shuffle  xor %{{.*}}, %c16_i32
// CHECK: arith.maximumf
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32
// CHECK: arith.maximumf
// ... the first lane of each row stores the row's value (one partial per row: a row lies in
// one warp) ...
// CHECK: scf.if
// CHECK: arith.muli
// CHECK-NEXT: arith.addi
// CHECK-NEXT: memref.store {{.*}} : memref<4xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.shuffle  xor %{{.*}}, %c16_i32
// CHECK: memref.store {{.*}} : memref<4xf32, #gpu.address_space<workgroup>>
// ... and after a barrier every thread reads the rows of the result it holds.
// CHECK: gpu.barrier
// CHECK: memref.load {{.*}} : memref<4xf32, #gpu.address_space<workgroup>>
// The broadcast reuses the scratch only after a barrier.
// CHECK: memref.view {{.*}} to memref<4xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: gpu.barrier
// CHECK: memref.store {{.*}} : memref<4xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK-COUNT-2: memref.load {{.*}} : memref<4xf32, #gpu.address_space<workgroup>>
// CHECK: arith.subf
// CHECK: gpu.return

tile.kernel @rowmax(in %X : !tile.tensor<[M, N], f32>, out %Y : !tile.tensor<[M, N], f32>) {
  %M = tile.dim "M"
  %c4 = arith.constant 4 : index
  %gm = arith.ceildivsi %M, %c4 : index
  tile.grid (%i) in (%gm) {
    %c0 = arith.constant 0 : index
    %vx = tile.view %X[%i, %c0] : !tile.tensor<[M, N], f32> -> !tile.view<4x32xf32>
    %x = tile.load %vx : !tile.view<4x32xf32> -> !tile.tile<4x32xf32>
    %m = tile.reduce_max %x dim 1 : !tile.tile<4x32xf32> -> !tile.tile<4xf32>
    %b = tile.broadcast %m [0] : !tile.tile<4xf32> -> !tile.tile<4x32xf32>
    %d = tile.sub %x, %b : !tile.tile<4x32xf32>
    %vy = tile.view %Y[%i, %c0] : !tile.tensor<[M, N], f32> -> !tile.view<4x32xf32>
    tile.store %d, %vy : !tile.tile<4x32xf32>, !tile.view<4x32xf32>
  }
}

// A reduction whose shape the shuffles do not fit (a row of 24) folds each row in one thread
// over the staged tile.
// CHECK-LABEL: gpu.func @rowsum_odd
// CHECK-NOT: gpu.shuffle
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (f32)
// CHECK: memref.load {{.*}} : memref<96xf32, #gpu.address_space<workgroup>>
// CHECK: arith.addf
// CHECK: gpu.return
tile.kernel @rowsum_odd(in %X : !tile.tensor<[M, N], f32>, out %Y : !tile.tensor<[M], f32>) {
  %M = tile.dim "M"
  %c4 = arith.constant 4 : index
  %gm = arith.ceildivsi %M, %c4 : index
  tile.grid (%i) in (%gm) {
    %c0 = arith.constant 0 : index
    %vx = tile.view %X[%i, %c0] : !tile.tensor<[M, N], f32> -> !tile.view<4x24xf32>
    %x = tile.load %vx : !tile.view<4x24xf32> -> !tile.tile<4x24xf32>
    %s = tile.reduce_sum %x dim 1 : !tile.tile<4x24xf32> -> !tile.tile<4xf32>
    %vy = tile.view %Y[%i] : !tile.tensor<[M], f32> -> !tile.view<4xf32>
    tile.store %s, %vy : !tile.tile<4xf32>, !tile.view<4xf32>
  }
}

// Q K^T on the tensor cores reads K as it is: K's tile goes global -> shared by cp.async (no
// transposed copy), B's fragments come from its rows by ldmatrix without .trans (two 16x8
// fragments per x4). The scores
// are reduced along their rows, so each row stays in one warp (warps 2 x 1): the row max folds
// on the four lanes of a quad by shuffles and stays there (the rows layout, #tile.mma on the
// rank-1 result), no shared memory, no barrier; one lane per quad stores it.
// CHECK-LABEL: gpu.func @scores
// CHECK-SAME: kiln.threads = 64
// CHECK: nvvm.cp.async.commit.group
// CHECK: nvvm.cp.async.commit.group
// CHECK: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<row>, num = 4
// CHECK-NOT: nvvm.mma_layout<col>
// CHECK: nvvm.mma.sync
// CHECK: gpu.shuffle  xor %{{.*}}, %c2_i32
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32
// CHECK-NOT: gpu.shuffle  xor %{{.*}}, %c4_i32
// CHECK-NOT: gpu.barrier
// CHECK: arith.remui %{{.*}}, %c4
// CHECK: memref.store {{.*}}#gpu.address_space<global>
// CHECK: gpu.return
tile.kernel @scores(in %Q : !tile.tensor<[M, 64], bf16>, in %K : !tile.tensor<[N, 64], bf16>, out %S : !tile.tensor<[M], f32>) {
  %M = tile.dim "M"
  %c32 = arith.constant 32 : index
  %gm = arith.ceildivsi %M, %c32 : index
  tile.grid (%i) in (%gm) {
    %c0 = arith.constant 0 : index
    %vq = tile.view %Q[%i, %c0] : !tile.tensor<[M, 64], bf16> -> !tile.view<32x64xbf16>
    %q = tile.load %vq : !tile.view<32x64xbf16> -> !tile.tile<32x64xbf16>
    %vk = tile.view %K[%c0, %c0] : !tile.tensor<[N, 64], bf16> -> !tile.view<32x64xbf16>
    %k = tile.load %vk : !tile.view<32x64xbf16> -> !tile.tile<32x64xbf16>
    %kt = tile.transpose %k : !tile.tile<32x64xbf16> -> !tile.tile<64x32xbf16>
    %z = tile.full 0.000000e+00 : !tile.tile<32x32xf32>
    %s = tile.dot %q, %kt, %z : !tile.tile<32x64xbf16>, !tile.tile<64x32xbf16> -> !tile.tile<32x32xf32>
    %m = tile.reduce_max %s dim 1 : !tile.tile<32x32xf32> -> !tile.tile<32xf32>
    %vs = tile.view %S[%i] : !tile.tensor<[M], f32> -> !tile.view<32xf32>
    tile.store %m, %vs : !tile.tile<32xf32>, !tile.view<32xf32>
  }
}
