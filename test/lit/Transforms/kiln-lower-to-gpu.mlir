// RUN: kiln-opt %s --kiln-lower-to-gpu="num-warps=2" | FileCheck %s

// A bf16 GEMM tile whose shapes fit the tensor cores: one CTA per grid index, 64 threads,
// the accumulator carried in mma layout, operands staged in dynamic shared memory.

// CHECK: module attributes {gpu.container_module}
// CHECK: gpu.module @kiln
// CHECK: gpu.func @mm(%{{.*}}: memref<?x?xbf16, strided<[?, ?], offset: ?>, #gpu.address_space<global>>
// CHECK-SAME: kernel
// CHECK-SAME: kiln.shared_bytes = 1536 : i64, kiln.threads = 64 : i64
// CHECK-SAME: known_block_size = array<i32: 64, 1, 1>
// CHECK: gpu.thread_id  x
// CHECK: gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK: gpu.block_id  x
// CHECK: gpu.block_id  y
// The k loop carries 2 fragments x 4 f32 per thread: 32x16 over 2 warps of 16x16.
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32)
// The dot's operands go global -> shared directly, between one pair of barriers: A at
// offset 0, B after it. Where the rows are 16-byte aligned (checked at run time), 16-byte
// cp.async copies zero-fill past the edge; otherwise a masked element-by-element copy.
// CHECK: gpu.barrier
// CHECK: memref.view %{{.*}} : memref<?xi8, #gpu.address_space<workgroup>> to memref<512xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.extract_strided_metadata %arg0
// CHECK: scf.if
// CHECK: memref.reinterpret_cast {{.*}} strides: [%{{.*}}, 1]
// CHECK: nvgpu.device_async_copy {{.*}}, 8, %{{.*}} : memref<?x?xbf16, strided<[?, 1], offset: ?>, #gpu.address_space<global>> to memref<512xbf16, #gpu.address_space<workgroup>>
// CHECK: } else {
// CHECK: scf.if %{{.*}} -> (bf16)
// CHECK: memref.view %{{.*}}[%c1024{{.*}}] : memref<?xi8, #gpu.address_space<workgroup>> to memref<256xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.extract_strided_metadata %arg1
// CHECK: nvgpu.device_async_copy
// CHECK: nvvm.cp.async.wait.group 0
// CHECK-NEXT: gpu.barrier
// Fragments come from shared memory with ldmatrix (x4 for A, x2.trans for B).
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK: llvm.inline_asm has_side_effects "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16
// CHECK: llvm.inline_asm has_side_effects "ldmatrix.sync.aligned.m8n8.x4.shared.b16
// CHECK-COUNT-2: llvm.inline_asm "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// Stores go back to global memory only where the tile is inside C.
// CHECK: scf.if
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
