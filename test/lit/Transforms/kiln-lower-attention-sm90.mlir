// RUN: kiln-opt %s --split-input-file --kiln-lower-attention-sm90 | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kiln-lower-attention-sm90="stages=2" | FileCheck %s --check-prefix=TWO
// RUN: not kiln-opt %s --split-input-file --kiln-lower-attention-sm90="stages=1" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not kiln-opt %s --split-input-file --kiln-lower-attention-sm90="stages=4" 2>&1 | FileCheck %s --check-prefix=BIG
// RUN: kiln-opt %s --split-input-file --kiln-lower-attention-sm90="consumers=3" | FileCheck %s --check-prefix=THREE
// RUN: not kiln-opt %s --split-input-file --kiln-lower-attention-sm90="consumers=4" 2>&1 | FileCheck %s --check-prefix=BAD4
// RUN: kiln-opt %s --split-input-file --kiln-lower-attention-sm90 | FileCheck %s --check-prefix=KEYS
// RUN: kiln-opt %s --split-input-file --kiln-lower-attention-sm90 | FileCheck %s --check-prefix=FOLD
// RUN: kiln-opt %s --split-input-file --kiln-lower-attention-sm90 | FileCheck %s --check-prefix=ROWS
// RUN: kiln-opt %s --split-input-file --kiln-lower-attention-sm90 | FileCheck %s --check-prefix=DECODE
// RUN: kiln-opt %s --split-input-file --kiln-lower-attention-sm90 | FileCheck %s --check-prefix=PADDED
// RUN: kiln-opt %s --split-input-file --kiln-lower-attention-sm90 | FileCheck %s --check-prefix=PACKED

// Causal attention as the DSL traces it (catalogue::attention, head dim 128, 64 query rows
// by 128 keys a step): a TMA + wgmma twin beside the tile kernel, which stays for the
// portable lowering.
// CHECK: module attributes {gpu.container_module}
// CHECK-NOT: kiln.sm90
// CHECK: tile.kernel @attention_causal
// CHECK: gpu.module @kiln
// Parameters: tensor maps of Q, K and V; O's address and strides; the query heads per
// program (head folding, below); the dims B, H, G, S.
// CHECK: gpu.func @attention_causal__sm90_attn(%{{[a-z0-9]*}}: !llvm.ptr, %{{[a-z0-9]*}}: !llvm.ptr, %{{[a-z0-9]*}}: !llvm.ptr, %{{[a-z0-9]*}}: !llvm.ptr<1>, %{{[a-z0-9]*}}: i64, %{{[a-z0-9]*}}: i64, %{{[a-z0-9]*}}: i64, %{{[a-z0-9]*}}: i32, %{{[a-z0-9]*}}: i32, %{{[a-z0-9]*}}: i32, %{{[a-z0-9]*}}: i32, %{{[a-z0-9]*}}: i32) kernel
// One CTA per pair of query tiles, head and batch; 4-D tensor maps of 64-column boxes.
// CHECK-SAME: \22grid\22:[{\22arg\22:3,\22dim\22:2,\22name\22:\22S\22,\22tile\22:128},{\22arg\22:3,\22dim\22:1,\22name\22:\22H\22,\22tile\22:1},{\22arg\22:3,\22dim\22:0,\22name\22:\22B\22,\22tile\22:1}]
// CHECK-SAME: \22kind\22:\22attention\22
// CHECK-SAME: {\22arg\22:0,\22box\22:[64,64,1,1],\22dim\22:0,\22kind\22:\22tensormap\22}
// CHECK-SAME: {\22arg\22:1,\22box\22:[64,128,1,1],\22dim\22:0,\22kind\22:\22tensormap\22}
// CHECK-SAME: {\22arg\22:2,\22box\22:[64,128,1,1],\22dim\22:0,\22kind\22:\22tensormap\22}
// CHECK-SAME: {\22arg\22:3,\22dim\22:0,\22kind\22:\22pointer\22}
// CHECK-SAME: \22persistent\22:false
// CHECK-SAME: \22stages\22:3
// CHECK-SAME: \22threads\22:384
// CHECK-SAME: \22tile\22:[128,128,128]
// CHECK-SAME: kiln.layouts = {acc = #tile.wgmma<m = 64, n = 128>, k = #tile.nvmma_shared<swizzle = 128, major = "k">, q = #tile.nvmma_shared<swizzle = 128, major = "k">, s = #tile.wgmma<m = 64, n = 128>, v = #tile.nvmma_shared<swizzle = 128, major = "mn">}
// The warpgroup index from lane 0 (uniform to ptxas); barriers set up by thread 0.
// CHECK: gpu.shuffle  idx
// CHECK: nvvm.mbarrier.init
// CHECK: nvvm.fence.mbarrier.init
// Producer: gives registers away, loads both Q tiles, then K and V a step at a time.
// CHECK: nvvm.setmaxregister  decrease 32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK: scf.for
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.mbarrier.arrive.expect_tx
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// Consumers: consumer 1 hands the first turn to consumer 0 (ping-pong on named barriers);
// step 0's scores and softmax before the loop (the program evaluated on the scores' wgmma
// fragments, row maxima by quad shuffles), P packed. Then per step j, FA3's overlap: wait
// for stage j + 1 and the turn; issue S_{j+1} = Q K^T, rescale acc while it runs, issue
// P_j V_j (P from registers); hand the turn over; wait for S_{j+1} only (wait_group 1, its
// values tied through the wait), evaluate its softmax while P_j V_j runs, then wait for it
// (wait_group 0), release stage j and pack P_{j+1}. The last step's product follows the loop.
// CHECK: nvvm.setmaxregister  increase 232
// CHECK: nvvm.barrier.arrive id = %{{[0-9]+}} number_of_threads = %c256_i32
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK: llvm.inline_asm has_side_effects {{.*}} "wgmma.wait_group.sync.aligned 0;"
// The causal mask (key < S, key <= query) from the tile's index bounds: when it holds on the
// whole tile (uniform across the warpgroup), the branch skips it; else each score is masked
// by i32 compares.
// CHECK: arith.cmpi slt
// CHECK: arith.cmpi sle
// CHECK: %[[ALL:[0-9]+]] = arith.andi %{{[0-9]+}}, %{{[0-9]+}} : i1
// CHECK: scf.if %[[ALL]] -> (f32
// CHECK-NEXT: scf.yield
// CHECK-NEXT: } else {
// CHECK: arith.cmpi slt, %{{[0-9]+}}, %{{[0-9]+}} : i32
// CHECK: arith.cmpi sle, %{{[0-9]+}}, %{{[0-9]+}} : i32
// CHECK: arith.andi %{{[0-9]+}}, %{{[0-9]+}} : i1
// CHECK: arith.select %{{[0-9]+}}, %{{.*}}, %{{.*}} : f32
// The row maximum as a tree (the first level pairs the branch's results), on the unscaled
// scores, times the scale after the quad shuffles; then s - m as one fma of the unscaled
// score; exp2 as one ex2.approx.ftz (no subnormal rescaling around it).
// CHECK: %[[M1:[0-9]+]] = arith.maximumf %[[MASKED:[0-9]+]]#0, %[[MASKED]]#1 : f32
// CHECK: %[[M2:[0-9]+]] = arith.maximumf %[[MASKED]]#4, %[[MASKED]]#5 : f32
// CHECK: arith.maximumf %[[M1]], %[[M2]] : f32
// CHECK: gpu.shuffle  xor
// CHECK: gpu.shuffle  xor
// CHECK: arith.mulf %{{[0-9]+}}, %cst{{.*}} : f32
// CHECK: math.fma %[[MASKED]]#0, %cst{{.*}}, %{{[0-9]+}} : f32
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// P rounded once, in pairs, from the f32 exponentials (not through bf16 and back).
// CHECK: arith.truncf %{{[0-9]+}} : vector<2xf32> to vector<2xbf16>
// Loop versioning: while the mask holds on the next step's whole tile (scf.while), steps with
// no mask and no branch between the two waits (ptxas waits for an in-flight wgmma where
// paths join); then the rest (scf.for) with per-element selects, still without a branch.
// CHECK: scf.while
// CHECK: scf.condition
// CHECK: } do {
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.barrier id =
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async {{.*}} D[<f32>, <zero>]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: arith.mulf
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-8: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.barrier.arrive id =
// CHECK: llvm.inline_asm has_side_effects {{.*}} "wgmma.wait_group.sync.aligned 1;"
// CHECK-NOT: scf.if
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK-NOT: scf.if
// CHECK: llvm.inline_asm has_side_effects {{.*}} "wgmma.wait_group.sync.aligned 0;"
// CHECK: nvvm.mbarrier.arrive
// CHECK: scf.for
// CHECK: llvm.inline_asm has_side_effects {{.*}} "wgmma.wait_group.sync.aligned 1;"
// CHECK-NOT: scf.if
// CHECK: arith.select
// CHECK-NOT: scf.if
// CHECK: llvm.inline_asm has_side_effects {{.*}} "wgmma.wait_group.sync.aligned 0;"
// CHECK: nvvm.mbarrier.arrive
// CHECK: arith.truncf %{{[0-9]+}} : vector<2xf32> to vector<2xbf16>
// CHECK: scf.yield
// CHECK: nvvm.barrier id =
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK: nvvm.barrier.arrive id =
// CHECK: llvm.inline_asm has_side_effects {{.*}} "wgmma.wait_group.sync.aligned 0;"
// CHECK: nvvm.mbarrier.arrive
// The other program's remaining steps: waited for, their turns taken and passed, released;
// consumer 0 takes back the last turn.
// CHECK: scf.for
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.barrier id =
// CHECK: nvvm.barrier.arrive id =
// CHECK: nvvm.mbarrier.arrive
// CHECK: nvvm.barrier id =
// O stored from registers in pairs.
// CHECK: llvm.store {{.*}} {alignment = 4 : i64} : i32, !llvm.ptr<1>
// TWO: \22stages\22:2
// Three consumers (kiln's choice at head dim 64 over a whole sequence): 512 threads, a CTA
// per three query tiles, 160 registers each (the pool of 512 x 128 less the producer's
// 128 x 32), the turn passed round robin and taken first from the last consumer.
// THREE: \22grid\22:[{\22arg\22:3,\22dim\22:2,\22name\22:\22S\22,\22tile\22:192}
// THREE-SAME: \22threads\22:512
// THREE-SAME: \22tile\22:[192,128,128]
// THREE: nvvm.mbarrier.init %{{.*}}, %c384_i32
// THREE: nvvm.setmaxregister  increase 160
// THREE: arith.remui %{{.*}}, %c3_i32
// Key splits: the loop is an online softmax (max, l a + y, acc a from -inf, 0, 0) and its one
// mask is index comparisons, so the plan allows clusters of up to 8 CTAs cutting K's keys
// (dim 2, 128 a step). The CTA's programs from the cluster's index; each boundary checked
// from the mask's bounds at its first key; after the loops the consumers meet (named
// barrier 3), a cluster barrier, rank 0 reads its peers' states through distributed
// shared memory and merges them, a second cluster barrier, then rank 0's epilogue.
// KEYS: \22k_cluster\22:8
// KEYS-SAME: \22reduction\22:{\22arg\22:1,\22dim\22:2,\22name\22:\22S\22,\22tile\22:128}
// KEYS: %[[SIZE:[0-9]+]] = nvvm.read.ptx.sreg.cluster.nctarank
// KEYS: nvvm.read.ptx.sreg.cluster.ctarank
// KEYS: arith.divui %{{[0-9]+}}, %[[SIZE]]
// KEYS: scf.for %{{.*}} = %c1_i32{{.*}} to %[[SIZE]] step %c1_i32{{.*}} iter_args(%{{.*}} = %true) -> (i1)
// KEYS: nvvm.setmaxregister  decrease 32
// KEYS: nvvm.cluster.arrive
// KEYS-NEXT: nvvm.cluster.wait
// KEYS-NEXT: nvvm.cluster.arrive
// KEYS-NEXT: nvvm.cluster.wait
// KEYS: nvvm.setmaxregister  increase 232
// KEYS: nvvm.barrier id = %c3_i32 number_of_threads = %c256_i32
// KEYS: nvvm.cluster.arrive
// KEYS: nvvm.cluster.wait
// KEYS: nvvm.mapa
// KEYS: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<7> -> f32
// KEYS: arith.maximumf
// KEYS: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// KEYS: math.fma
// KEYS: nvvm.cluster.arrive
// KEYS-NEXT: nvvm.cluster.wait
// KEYS: llvm.store {{.*}} {alignment = 4 : i64} : i32, !llvm.ptr<1>
// A mask of "ne" (whose bounds cannot say a part's first key is kept): no key splits, and
// the plan says why.
// KEYS-LABEL: gpu.func @attention_no_diagonal__sm90_attn
// KEYS-SAME: \22k_cluster\22:1
// KEYS-SAME: \22no_key_splits\22:\22a select's mask is not comparisons of index tiles\22
// KEYS-NOT: nvvm.cluster.arrive
// KEYS-LABEL: gpu.func @attention_one_head_each__sm90_attn
// Head folding: K's and V's head is h / (H / G) as the DSL writes it and h is used nowhere
// else, so the launch may give a program f query heads (an i32 parameter): ceildiv(H, f)
// programs per batch along the heads, the first head f times the program's; Q's expected
// bytes f T rows a box where f > 1; the program's rows mod T; O's head h + r / T where f > 1.
// FOLD-LABEL: gpu.func @attention_causal__sm90_attn(
// FOLD-SAME: %arg6: i64, %[[F:arg7]]: i32, %arg8: i32, %arg9: i32, %[[S:arg10]]: i32
// FOLD-SAME: {\22arg\22:1,\22dim\22:1,\22kind\22:\22head_fold\22}
// FOLD: %[[FM1:[0-9]+]] = arith.subi %[[F]], %c1_i32
// FOLD-NEXT: %[[HF:[0-9]+]] = arith.addi %arg9, %[[FM1]] : i32
// FOLD-NEXT: %[[HEADS:[0-9]+]] = arith.divui %[[HF]], %[[F]] : i32
// FOLD: %[[HI:[0-9]+]] = arith.remui %{{[0-9]+}}, %[[HEADS]] : i32
// FOLD-NEXT: arith.muli %[[HI]], %[[F]] : i32
// FOLD: %[[FOLDED:[0-9]+]] = arith.cmpi ult, %c1_i32{{.*}}, %[[F]] : i32
// FOLD-NEXT: %[[FS:[0-9]+]] = arith.muli %[[F]], %[[S]] : i32
// FOLD: %[[FB:[0-9]+]] = arith.muli %[[FS]], %c512_i32 : i32
// FOLD-NEXT: %[[QB:[0-9]+]] = arith.select %[[FOLDED]], %[[FB]], %c32768_i32 : i32
// FOLD: nvvm.mbarrier.arrive.expect_tx %{{[0-9]+}}, %[[QB]]
// FOLD: nvvm.setmaxregister  increase 232
// FOLD: arith.remui %{{[0-9]+}}, %[[S]] : i32
// FOLD-NEXT: arith.remui %{{[0-9]+}}, %[[S]] : i32
// FOLD: %[[OFF:[0-9]+]] = arith.divui %{{[0-9]+}}, %[[S]] : i32
// FOLD: arith.select %{{[0-9]+}}, %[[OFF]], %c0_i32
// FOLD: llvm.store {{.*}} : i32, !llvm.ptr<1>
// A kernel whose K head is not h / (H / G) has no such parameter (the last one here).
// FOLD-LABEL: gpu.func @attention_one_head_each__sm90_attn
// FOLD-NOT: head_fold
// FOLD: gpu.return
// BAD4: consumers must be 0 (kiln's choice), 2 or 3, got 4
// BAD: stages must be 0 (the deepest that fits) or 2..4, got 1
// Four stages of 128 keys at head dim 128 (64 KiB each) and two Q tiles: past 227 KiB.
// BIG: stages=4 does not fit in shared memory at head dim 128 and 128 keys per step

module {
  tile.kernel @attention_causal(in %Q: !tile.tensor<[B, H, S, 128], bf16>, in %K: !tile.tensor<[B, G, S, 128], bf16>, in %V: !tile.tensor<[B, G, S, 128], bf16>, out %O: !tile.tensor<[B, H, S, 128], bf16>) {
    %B = tile.dim "B"
    %H = tile.dim "H"
    %G = tile.dim "G"
    %S = tile.dim "S"
    %c64 = arith.constant 64 : index
    %0 = arith.ceildivsi %S, %c64 : index
    tile.grid (%arg0, %arg1, %arg2) in (%0, %H, %B) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %1 = arith.maxsi %G, %c1 : index
      %2 = arith.floordivsi %H, %1 : index
      %c1_0 = arith.constant 1 : index
      %3 = arith.maxsi %2, %c1_0 : index
      %4 = arith.floordivsi %arg1, %3 : index
      %5 = tile.view %Q[%arg2, %arg1, %arg0, %c0] : <[B, H, S, 128], bf16> -> <64x128xbf16>
      %6 = tile.load %5 : <64x128xbf16> -> <64x128xbf16>
      %7 = tile.iota dim 0 : <64x128xf32>
      %c64_1 = arith.constant 64 : index
      %8 = arith.muli %arg0, %c64_1 : index
      %9 = tile.splat %8 : index -> <64x128xf32>
      %10 = tile.add %7, %9 : <64x128xf32>
      %c128 = arith.constant 128 : index
      %11 = arith.ceildivsi %S, %c128 : index
      %c64_2 = arith.constant 64 : index
      %12 = arith.muli %arg0, %c64_2 : index
      %c64_3 = arith.constant 64 : index
      %13 = arith.addi %12, %c64_3 : index
      %c128_4 = arith.constant 128 : index
      %14 = arith.ceildivsi %13, %c128_4 : index
      %15 = arith.minsi %11, %14 : index
      %16 = tile.full 0xFFF0000000000000 : <64xf32>
      %17 = tile.full 0.000000e+00 : <64xf32>
      %18 = tile.full 0.000000e+00 : <64x128xf32>
      %19:3 = tile.loop %arg3 to %15 stages 1 carry(%arg4 = %16 : !tile.tile<64xf32>, %arg5 = %17 : !tile.tile<64xf32>, %arg6 = %18 : !tile.tile<64x128xf32>) {
        %24 = tile.view %K[%arg2, %4, %arg3, %c0] : <[B, G, S, 128], bf16> -> <128x128xbf16>
        %25 = tile.load %24 : <128x128xbf16> -> <128x128xbf16>
        %26 = tile.transpose %25 : <128x128xbf16> -> <128x128xbf16>
        %27 = tile.full 0.000000e+00 : <64x128xf32>
        %28 = tile.dot %6, %26, %27 : <64x128xbf16>, <128x128xbf16> -> <64x128xf32>
        %29 = tile.scale %28, 0.12751743082459868 : <64x128xf32>
        %30 = tile.iota dim 1 : <64x128xf32>
        %c128_5 = arith.constant 128 : index
        %31 = arith.muli %arg3, %c128_5 : index
        %32 = tile.splat %31 : index -> <64x128xf32>
        %33 = tile.add %30, %32 : <64x128xf32>
        %34 = tile.splat %S : index -> <64x128xf32>
        %35 = tile.cmp "lt", %33, %34 : <64x128xf32>
        %36 = tile.cmp "le", %33, %10 : <64x128xf32>
        %37 = tile.mul %35, %36 : <64x128xf32>
        %38 = tile.full 0xFFF0000000000000 : <64x128xf32>
        %39 = tile.select %37, %29, %38 : <64x128xf32>
        %40 = tile.reduce_max %39 dim 1 : <64x128xf32> -> <64xf32>
        %41 = tile.max %arg4, %40 : <64xf32>
        %42 = tile.broadcast %41 [0] : <64xf32> -> <64x128xf32>
        %43 = tile.sub %39, %42 : <64x128xf32>
        %44 = tile.exp2 %43 : <64x128xf32>
        %45 = tile.sub %arg4, %41 : <64xf32>
        %46 = tile.exp2 %45 : <64xf32>
        %47 = tile.mul %arg5, %46 : <64xf32>
        %48 = tile.reduce_sum %44 dim 1 : <64x128xf32> -> <64xf32>
        %49 = tile.add %47, %48 : <64xf32>
        %50 = tile.cast %44 : <64x128xf32> -> <64x128xbf16>
        %51 = tile.view %V[%arg2, %4, %arg3, %c0] : <[B, G, S, 128], bf16> -> <128x128xbf16>
        %52 = tile.load %51 : <128x128xbf16> -> <128x128xbf16>
        %53 = tile.broadcast %46 [0] : <64xf32> -> <64x128xf32>
        %54 = tile.mul %arg6, %53 : <64x128xf32>
        %55 = tile.dot %50, %52, %54 : <64x128xbf16>, <128x128xbf16> -> <64x128xf32>
        tile.yield %41, %49, %55 : !tile.tile<64xf32>, !tile.tile<64xf32>, !tile.tile<64x128xf32>
      }
      %20 = tile.view %O[%arg2, %arg1, %arg0, %c0] : <[B, H, S, 128], bf16> -> <64x128xbf16>
      %21 = tile.broadcast %19#1 [0] : <64xf32> -> <64x128xf32>
      %22 = tile.div %19#2, %21 : <64x128xf32>
      %23 = tile.cast %22 : <64x128xf32> -> <64x128xbf16>
      tile.store %23, %20 : <64x128xbf16>, <64x128xbf16>
    }
  }
}

// -----

// K read at the query tile: the CTA's two programs would need different K tiles, so no
// twin; the module says why.
// CHECK: module attributes {kiln.sm90 = "not attention: K's or V's head is computed from the query tile or the key tile"}
// CHECK-NOT: gpu.module

module {
  tile.kernel @not_attention(in %Q: !tile.tensor<[B, H, S, 128], bf16>, in %K: !tile.tensor<[B, G, S, 128], bf16>, in %V: !tile.tensor<[B, G, S, 128], bf16>, out %O: !tile.tensor<[B, H, S, 128], bf16>) {
    %B = tile.dim "B"
    %H = tile.dim "H"
    %G = tile.dim "G"
    %S = tile.dim "S"
    %c64 = arith.constant 64 : index
    %0 = arith.ceildivsi %S, %c64 : index
    tile.grid (%arg0, %arg1, %arg2) in (%0, %H, %B) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %1 = arith.maxsi %G, %c1 : index
      %2 = arith.floordivsi %H, %1 : index
      %c1_0 = arith.constant 1 : index
      %3 = arith.maxsi %2, %c1_0 : index
      %4 = arith.floordivsi %arg1, %3 : index
      %5 = tile.view %Q[%arg2, %arg1, %arg0, %c0] : <[B, H, S, 128], bf16> -> <64x128xbf16>
      %6 = tile.load %5 : <64x128xbf16> -> <64x128xbf16>
      %7 = tile.iota dim 0 : <64x128xf32>
      %c64_1 = arith.constant 64 : index
      %8 = arith.muli %arg0, %c64_1 : index
      %9 = tile.splat %8 : index -> <64x128xf32>
      %10 = tile.add %7, %9 : <64x128xf32>
      %c128 = arith.constant 128 : index
      %11 = arith.ceildivsi %S, %c128 : index
      %c64_2 = arith.constant 64 : index
      %12 = arith.muli %arg0, %c64_2 : index
      %c64_3 = arith.constant 64 : index
      %13 = arith.addi %12, %c64_3 : index
      %c128_4 = arith.constant 128 : index
      %14 = arith.ceildivsi %13, %c128_4 : index
      %15 = arith.minsi %11, %14 : index
      %16 = tile.full 0xFFF0000000000000 : <64xf32>
      %17 = tile.full 0.000000e+00 : <64xf32>
      %18 = tile.full 0.000000e+00 : <64x128xf32>
      %19:3 = tile.loop %arg3 to %15 stages 1 carry(%arg4 = %16 : !tile.tile<64xf32>, %arg5 = %17 : !tile.tile<64xf32>, %arg6 = %18 : !tile.tile<64x128xf32>) {
        %24 = tile.view %K[%arg2, %arg0, %arg3, %c0] : <[B, G, S, 128], bf16> -> <128x128xbf16>
        %25 = tile.load %24 : <128x128xbf16> -> <128x128xbf16>
        %26 = tile.transpose %25 : <128x128xbf16> -> <128x128xbf16>
        %27 = tile.full 0.000000e+00 : <64x128xf32>
        %28 = tile.dot %6, %26, %27 : <64x128xbf16>, <128x128xbf16> -> <64x128xf32>
        %29 = tile.scale %28, 0.12751743082459868 : <64x128xf32>
        %30 = tile.iota dim 1 : <64x128xf32>
        %c128_5 = arith.constant 128 : index
        %31 = arith.muli %arg3, %c128_5 : index
        %32 = tile.splat %31 : index -> <64x128xf32>
        %33 = tile.add %30, %32 : <64x128xf32>
        %34 = tile.splat %S : index -> <64x128xf32>
        %35 = tile.cmp "lt", %33, %34 : <64x128xf32>
        %36 = tile.cmp "le", %33, %10 : <64x128xf32>
        %37 = tile.mul %35, %36 : <64x128xf32>
        %38 = tile.full 0xFFF0000000000000 : <64x128xf32>
        %39 = tile.select %37, %29, %38 : <64x128xf32>
        %40 = tile.reduce_max %39 dim 1 : <64x128xf32> -> <64xf32>
        %41 = tile.max %arg4, %40 : <64xf32>
        %42 = tile.broadcast %41 [0] : <64xf32> -> <64x128xf32>
        %43 = tile.sub %39, %42 : <64x128xf32>
        %44 = tile.exp2 %43 : <64x128xf32>
        %45 = tile.sub %arg4, %41 : <64xf32>
        %46 = tile.exp2 %45 : <64xf32>
        %47 = tile.mul %arg5, %46 : <64xf32>
        %48 = tile.reduce_sum %44 dim 1 : <64x128xf32> -> <64xf32>
        %49 = tile.add %47, %48 : <64xf32>
        %50 = tile.cast %44 : <64x128xf32> -> <64x128xbf16>
        %51 = tile.view %V[%arg2, %4, %arg3, %c0] : <[B, G, S, 128], bf16> -> <128x128xbf16>
        %52 = tile.load %51 : <128x128xbf16> -> <128x128xbf16>
        %53 = tile.broadcast %46 [0] : <64xf32> -> <64x128xf32>
        %54 = tile.mul %arg6, %53 : <64x128xf32>
        %55 = tile.dot %50, %52, %54 : <64x128xbf16>, <128x128xbf16> -> <64x128xf32>
        tile.yield %41, %49, %55 : !tile.tile<64xf32>, !tile.tile<64xf32>, !tile.tile<64x128xf32>
      }
      %20 = tile.view %O[%arg2, %arg1, %arg0, %c0] : <[B, H, S, 128], bf16> -> <64x128xbf16>
      %21 = tile.broadcast %19#1 [0] : <64xf32> -> <64x128xf32>
      %22 = tile.div %19#2, %21 : <64x128xf32>
      %23 = tile.cast %22 : <64x128xf32> -> <64x128xbf16>
      tile.store %23, %20 : <64x128xbf16>, <64x128xbf16>
    }
  }
}

// -----

// A mask whose bounds say nothing ("ne": keys other than the query's own) is applied score
// by score, with no branch, its index tiles still compared as i32.
// CHECK-LABEL: tile.kernel @attention_no_diagonal
// CHECK-LABEL: gpu.func @attention_no_diagonal__sm90_attn
// CHECK: scf.for
// CHECK: scf.for
// CHECK-NOT: scf.if %{{.*}} -> (f32
// CHECK: arith.cmpi ne, %{{[0-9]+}}, %{{[0-9]+}} : i32
// CHECK-NOT: scf.if %{{.*}} -> (f32
// CHECK: arith.select %{{[0-9]+}}, %{{.*}}, %{{.*}} : f32
// CHECK-NOT: scf.if %{{.*}} -> (f32
// CHECK: arith.maximumf

module {
  tile.kernel @attention_no_diagonal(in %Q: !tile.tensor<[B, H, S, 128], bf16>, in %K: !tile.tensor<[B, G, S, 128], bf16>, in %V: !tile.tensor<[B, G, S, 128], bf16>, out %O: !tile.tensor<[B, H, S, 128], bf16>) {
    %B = tile.dim "B"
    %H = tile.dim "H"
    %G = tile.dim "G"
    %S = tile.dim "S"
    %c64 = arith.constant 64 : index
    %0 = arith.ceildivsi %S, %c64 : index
    tile.grid (%arg0, %arg1, %arg2) in (%0, %H, %B) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %1 = arith.maxsi %G, %c1 : index
      %2 = arith.floordivsi %H, %1 : index
      %c1_0 = arith.constant 1 : index
      %3 = arith.maxsi %2, %c1_0 : index
      %4 = arith.floordivsi %arg1, %3 : index
      %5 = tile.view %Q[%arg2, %arg1, %arg0, %c0] : <[B, H, S, 128], bf16> -> <64x128xbf16>
      %6 = tile.load %5 : <64x128xbf16> -> <64x128xbf16>
      %7 = tile.iota dim 0 : <64x128xf32>
      %c64_1 = arith.constant 64 : index
      %8 = arith.muli %arg0, %c64_1 : index
      %9 = tile.splat %8 : index -> <64x128xf32>
      %10 = tile.add %7, %9 : <64x128xf32>
      %c128 = arith.constant 128 : index
      %11 = arith.ceildivsi %S, %c128 : index
      %c64_2 = arith.constant 64 : index
      %12 = arith.muli %arg0, %c64_2 : index
      %c64_3 = arith.constant 64 : index
      %13 = arith.addi %12, %c64_3 : index
      %c128_4 = arith.constant 128 : index
      %14 = arith.ceildivsi %13, %c128_4 : index
      %15 = arith.minsi %11, %14 : index
      %16 = tile.full 0xFFF0000000000000 : <64xf32>
      %17 = tile.full 0.000000e+00 : <64xf32>
      %18 = tile.full 0.000000e+00 : <64x128xf32>
      %19:3 = tile.loop %arg3 to %15 stages 1 carry(%arg4 = %16 : !tile.tile<64xf32>, %arg5 = %17 : !tile.tile<64xf32>, %arg6 = %18 : !tile.tile<64x128xf32>) {
        %24 = tile.view %K[%arg2, %4, %arg3, %c0] : <[B, G, S, 128], bf16> -> <128x128xbf16>
        %25 = tile.load %24 : <128x128xbf16> -> <128x128xbf16>
        %26 = tile.transpose %25 : <128x128xbf16> -> <128x128xbf16>
        %27 = tile.full 0.000000e+00 : <64x128xf32>
        %28 = tile.dot %6, %26, %27 : <64x128xbf16>, <128x128xbf16> -> <64x128xf32>
        %29 = tile.scale %28, 0.12751743082459868 : <64x128xf32>
        %30 = tile.iota dim 1 : <64x128xf32>
        %c128_5 = arith.constant 128 : index
        %31 = arith.muli %arg3, %c128_5 : index
        %32 = tile.splat %31 : index -> <64x128xf32>
        %33 = tile.add %30, %32 : <64x128xf32>
        %34 = tile.splat %S : index -> <64x128xf32>
        %35 = tile.cmp "lt", %33, %34 : <64x128xf32>
        %36 = tile.cmp "ne", %33, %10 : <64x128xf32>
        %37 = tile.mul %35, %36 : <64x128xf32>
        %38 = tile.full 0xFFF0000000000000 : <64x128xf32>
        %39 = tile.select %37, %29, %38 : <64x128xf32>
        %40 = tile.reduce_max %39 dim 1 : <64x128xf32> -> <64xf32>
        %41 = tile.max %arg4, %40 : <64xf32>
        %42 = tile.broadcast %41 [0] : <64xf32> -> <64x128xf32>
        %43 = tile.sub %39, %42 : <64x128xf32>
        %44 = tile.exp2 %43 : <64x128xf32>
        %45 = tile.sub %arg4, %41 : <64xf32>
        %46 = tile.exp2 %45 : <64xf32>
        %47 = tile.mul %arg5, %46 : <64xf32>
        %48 = tile.reduce_sum %44 dim 1 : <64x128xf32> -> <64xf32>
        %49 = tile.add %47, %48 : <64xf32>
        %50 = tile.cast %44 : <64x128xf32> -> <64x128xbf16>
        %51 = tile.view %V[%arg2, %4, %arg3, %c0] : <[B, G, S, 128], bf16> -> <128x128xbf16>
        %52 = tile.load %51 : <128x128xbf16> -> <128x128xbf16>
        %53 = tile.broadcast %46 [0] : <64xf32> -> <64x128xf32>
        %54 = tile.mul %arg6, %53 : <64x128xf32>
        %55 = tile.dot %50, %52, %54 : <64x128xbf16>, <128x128xbf16> -> <64x128xf32>
        tile.yield %41, %49, %55 : !tile.tile<64xf32>, !tile.tile<64xf32>, !tile.tile<64x128xf32>
      }
      %20 = tile.view %O[%arg2, %arg1, %arg0, %c0] : <[B, H, S, 128], bf16> -> <64x128xbf16>
      %21 = tile.broadcast %19#1 [0] : <64xf32> -> <64x128xf32>
      %22 = tile.div %19#2, %21 : <64x128xf32>
      %23 = tile.cast %22 : <64x128xf32> -> <64x128xbf16>
      tile.store %23, %20 : <64x128xbf16>, <64x128xbf16>
    }
  }
}

// -----

// Each query head its own K/V head (K's head is h): no head folding.
module {
  tile.kernel @attention_one_head_each(in %Q: !tile.tensor<[B, H, S, 128], bf16>, in %K: !tile.tensor<[B, G, S, 128], bf16>, in %V: !tile.tensor<[B, G, S, 128], bf16>, out %O: !tile.tensor<[B, H, S, 128], bf16>) {
    %B = tile.dim "B"
    %H = tile.dim "H"
    %G = tile.dim "G"
    %S = tile.dim "S"
    %c64 = arith.constant 64 : index
    %0 = arith.ceildivsi %S, %c64 : index
    tile.grid (%arg0, %arg1, %arg2) in (%0, %H, %B) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %1 = arith.maxsi %G, %c1 : index
      %2 = arith.floordivsi %H, %1 : index
      %c1_0 = arith.constant 1 : index
      %3 = arith.maxsi %2, %c1_0 : index
      %4 = arith.floordivsi %arg1, %3 : index
      %5 = tile.view %Q[%arg2, %arg1, %arg0, %c0] : <[B, H, S, 128], bf16> -> <64x128xbf16>
      %6 = tile.load %5 : <64x128xbf16> -> <64x128xbf16>
      %7 = tile.iota dim 0 : <64x128xf32>
      %c64_1 = arith.constant 64 : index
      %8 = arith.muli %arg0, %c64_1 : index
      %9 = tile.splat %8 : index -> <64x128xf32>
      %10 = tile.add %7, %9 : <64x128xf32>
      %c128 = arith.constant 128 : index
      %11 = arith.ceildivsi %S, %c128 : index
      %c64_2 = arith.constant 64 : index
      %12 = arith.muli %arg0, %c64_2 : index
      %c64_3 = arith.constant 64 : index
      %13 = arith.addi %12, %c64_3 : index
      %c128_4 = arith.constant 128 : index
      %14 = arith.ceildivsi %13, %c128_4 : index
      %15 = arith.minsi %11, %14 : index
      %16 = tile.full 0xFFF0000000000000 : <64xf32>
      %17 = tile.full 0.000000e+00 : <64xf32>
      %18 = tile.full 0.000000e+00 : <64x128xf32>
      %19:3 = tile.loop %arg3 to %15 stages 1 carry(%arg4 = %16 : !tile.tile<64xf32>, %arg5 = %17 : !tile.tile<64xf32>, %arg6 = %18 : !tile.tile<64x128xf32>) {
        %24 = tile.view %K[%arg2, %arg1, %arg3, %c0] : <[B, G, S, 128], bf16> -> <128x128xbf16>
        %25 = tile.load %24 : <128x128xbf16> -> <128x128xbf16>
        %26 = tile.transpose %25 : <128x128xbf16> -> <128x128xbf16>
        %27 = tile.full 0.000000e+00 : <64x128xf32>
        %28 = tile.dot %6, %26, %27 : <64x128xbf16>, <128x128xbf16> -> <64x128xf32>
        %29 = tile.scale %28, 0.12751743082459868 : <64x128xf32>
        %30 = tile.iota dim 1 : <64x128xf32>
        %c128_5 = arith.constant 128 : index
        %31 = arith.muli %arg3, %c128_5 : index
        %32 = tile.splat %31 : index -> <64x128xf32>
        %33 = tile.add %30, %32 : <64x128xf32>
        %34 = tile.splat %S : index -> <64x128xf32>
        %35 = tile.cmp "lt", %33, %34 : <64x128xf32>
        %36 = tile.cmp "le", %33, %10 : <64x128xf32>
        %37 = tile.mul %35, %36 : <64x128xf32>
        %38 = tile.full 0xFFF0000000000000 : <64x128xf32>
        %39 = tile.select %37, %29, %38 : <64x128xf32>
        %40 = tile.reduce_max %39 dim 1 : <64x128xf32> -> <64xf32>
        %41 = tile.max %arg4, %40 : <64xf32>
        %42 = tile.broadcast %41 [0] : <64xf32> -> <64x128xf32>
        %43 = tile.sub %39, %42 : <64x128xf32>
        %44 = tile.exp2 %43 : <64x128xf32>
        %45 = tile.sub %arg4, %41 : <64xf32>
        %46 = tile.exp2 %45 : <64xf32>
        %47 = tile.mul %arg5, %46 : <64xf32>
        %48 = tile.reduce_sum %44 dim 1 : <64x128xf32> -> <64xf32>
        %49 = tile.add %47, %48 : <64xf32>
        %50 = tile.cast %44 : <64x128xf32> -> <64x128xbf16>
        %51 = tile.view %V[%arg2, %arg1, %arg3, %c0] : <[B, G, S, 128], bf16> -> <128x128xbf16>
        %52 = tile.load %51 : <128x128xbf16> -> <128x128xbf16>
        %53 = tile.broadcast %46 [0] : <64xf32> -> <64x128xf32>
        %54 = tile.mul %arg6, %53 : <64x128xf32>
        %55 = tile.dot %50, %52, %54 : <64x128xbf16>, <128x128xbf16> -> <64x128xf32>
        tile.yield %41, %49, %55 : !tile.tile<64xf32>, !tile.tile<64xf32>, !tile.tile<64x128xf32>
      }
      %20 = tile.view %O[%arg2, %arg1, %arg0, %c0] : <[B, H, S, 128], bf16> -> <64x128xbf16>
      %21 = tile.broadcast %19#1 [0] : <64xf32> -> <64x128xf32>
      %22 = tile.div %19#2, %21 : <64x128xf32>
      %23 = tile.cast %22 : <64x128xf32> -> <64x128xbf16>
      tile.store %23, %20 : <64x128xbf16>, <64x128xbf16>
    }
  }
}

// -----

// A second store: the log-sum-exp, one f32 value per query row, into LSE [B, H, S]
// (catalogue::attention_lse, causal, head dim 64). The twin takes its address and strides
// after O's, evaluates the row value after the loop (after the key splits' merge) and each
// row's first thread stores it: an f32 store beside O's packed pairs.
// ROWS-LABEL: gpu.func @attention_causal_lse__sm90_attn(%{{[a-z0-9]*}}: !llvm.ptr, %{{[a-z0-9]*}}: !llvm.ptr, %{{[a-z0-9]*}}: !llvm.ptr, %{{[a-z0-9]*}}: !llvm.ptr<1>, %{{[a-z0-9]*}}: i64, %{{[a-z0-9]*}}: i64, %{{[a-z0-9]*}}: i64, %{{[a-z0-9]*}}: !llvm.ptr<1>, %{{[a-z0-9]*}}: i64, %{{[a-z0-9]*}}: i64, %{{[a-z0-9]*}}: i64, %{{[a-z0-9]*}}: i32
// ROWS-SAME: \22k_cluster\22:8
// ROWS-SAME: {\22arg\22:4,\22dim\22:0,\22kind\22:\22pointer\22},{\22arg\22:4,\22dim\22:0,\22kind\22:\22stride\22}
// Head dim 64 over the whole sequence: three consumers by default.
// ROWS-SAME: \22threads\22:512
// ROWS: nvvm.setmaxregister  decrease 32
// ROWS: nvvm.setmaxregister  increase 160
// ROWS: math.log
// ROWS: llvm.store %{{.*}} : i32, !llvm.ptr<1>
// ROWS: llvm.store %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<1>
module {
  tile.kernel @attention_causal_lse(in %Q: !tile.tensor<[B, H, S, 64], bf16>, in %K: !tile.tensor<[B, G, S, 64], bf16>, in %V: !tile.tensor<[B, G, S, 64], bf16>, out %O: !tile.tensor<[B, H, S, 64], bf16>, out %LSE: !tile.tensor<[B, H, S], f32>) {
    %B = tile.dim "B"
    %H = tile.dim "H"
    %G = tile.dim "G"
    %S = tile.dim "S"
    %c64 = arith.constant 64 : index
    %0 = arith.ceildivsi %S, %c64 : index
    tile.grid (%arg0, %arg1, %arg2) in (%0, %H, %B) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %1 = arith.maxsi %G, %c1 : index
      %2 = arith.floordivsi %H, %1 : index
      %c1_0 = arith.constant 1 : index
      %3 = arith.maxsi %2, %c1_0 : index
      %4 = arith.floordivsi %arg1, %3 : index
      %c64_1 = arith.constant 64 : index
      %5 = arith.muli %arg0, %c64_1 : index
      %6 = tile.view %Q[%arg2, %arg1, %arg0, %c0] : <[B, H, S, 64], bf16> -> <64x64xbf16>
      %7 = tile.load %6 : <64x64xbf16> -> <64x64xbf16>
      %8 = tile.iota dim 0 : <64x64xf32>
      %9 = tile.splat %5 : index -> <64x64xf32>
      %10 = tile.add %8, %9 : <64x64xf32>
      %c64_2 = arith.constant 64 : index
      %11 = arith.ceildivsi %S, %c64_2 : index
      %c64_3 = arith.constant 64 : index
      %12 = arith.addi %5, %c64_3 : index
      %c64_4 = arith.constant 64 : index
      %13 = arith.ceildivsi %12, %c64_4 : index
      %14 = arith.minsi %11, %13 : index
      %15 = tile.full 0xFFF0000000000000 : <64xf32>
      %16 = tile.full 0.000000e+00 : <64xf32>
      %17 = tile.full 0.000000e+00 : <64x64xf32>
      %18:3 = tile.loop %arg3 to %14 stages 1 carry(%arg4 = %15 : !tile.tile<64xf32>, %arg5 = %16 : !tile.tile<64xf32>, %arg6 = %17 : !tile.tile<64x64xf32>) {
        %27 = tile.view %K[%arg2, %4, %arg3, %c0] : <[B, G, S, 64], bf16> -> <64x64xbf16>
        %28 = tile.load %27 : <64x64xbf16> -> <64x64xbf16>
        %29 = tile.transpose %28 : <64x64xbf16> -> <64x64xbf16>
        %30 = tile.full 0.000000e+00 : <64x64xf32>
        %31 = tile.dot %7, %29, %30 : <64x64xbf16>, <64x64xbf16> -> <64x64xf32>
        %32 = tile.scale %31, 0.18033688011112042 : <64x64xf32>
        %33 = tile.iota dim 1 : <64x64xf32>
        %c64_5 = arith.constant 64 : index
        %34 = arith.muli %arg3, %c64_5 : index
        %35 = tile.splat %34 : index -> <64x64xf32>
        %36 = tile.add %33, %35 : <64x64xf32>
        %37 = tile.splat %S : index -> <64x64xf32>
        %38 = tile.cmp "lt", %36, %37 : <64x64xf32>
        %39 = tile.cmp "le", %36, %10 : <64x64xf32>
        %40 = tile.mul %38, %39 : <64x64xf32>
        %41 = tile.full 0xFFF0000000000000 : <64x64xf32>
        %42 = tile.select %40, %32, %41 : <64x64xf32>
        %43 = tile.reduce_max %42 dim 1 : <64x64xf32> -> <64xf32>
        %44 = tile.max %arg4, %43 : <64xf32>
        %45 = tile.broadcast %44 [0] : <64xf32> -> <64x64xf32>
        %46 = tile.sub %42, %45 : <64x64xf32>
        %47 = tile.exp2 %46 : <64x64xf32>
        %48 = tile.sub %arg4, %44 : <64xf32>
        %49 = tile.exp2 %48 : <64xf32>
        %50 = tile.mul %arg5, %49 : <64xf32>
        %51 = tile.reduce_sum %47 dim 1 : <64x64xf32> -> <64xf32>
        %52 = tile.add %50, %51 : <64xf32>
        %53 = tile.cast %47 : <64x64xf32> -> <64x64xbf16>
        %54 = tile.view %V[%arg2, %4, %arg3, %c0] : <[B, G, S, 64], bf16> -> <64x64xbf16>
        %55 = tile.load %54 : <64x64xbf16> -> <64x64xbf16>
        %56 = tile.broadcast %49 [0] : <64xf32> -> <64x64xf32>
        %57 = tile.mul %arg6, %56 : <64x64xf32>
        %58 = tile.dot %53, %55, %57 : <64x64xbf16>, <64x64xbf16> -> <64x64xf32>
        tile.yield %44, %52, %58 : !tile.tile<64xf32>, !tile.tile<64xf32>, !tile.tile<64x64xf32>
      }
      %19 = tile.view %O[%arg2, %arg1, %arg0, %c0] : <[B, H, S, 64], bf16> -> <64x64xbf16>
      %20 = tile.broadcast %18#1 [0] : <64xf32> -> <64x64xf32>
      %21 = tile.div %18#2, %20 : <64x64xf32>
      %22 = tile.cast %21 : <64x64xf32> -> <64x64xbf16>
      tile.store %22, %19 : <64x64xbf16>, <64x64xbf16>
      %23 = tile.view %LSE[%arg2, %arg1, %arg0] : <[B, H, S], f32> -> <64xf32>
      %24 = tile.scale %18#0, 0.69314718055994529 : <64xf32>
      %25 = tile.log %18#1 : <64xf32>
      %26 = tile.add %24, %25 : <64xf32>
      tile.store %26, %23 : <64xf32>, <64xf32>
    }
  }
}

// -----

// Over a K/V cache (catalogue::attention_decode, head dim 64: Q [B, H, T, 64] beside K
// [B, G, S, 64]) two consumers, not three: a decode step has one query tile per head, and
// fewer programs a CTA keep more CTAs streaming the cache. 384 threads; each consumer 232
// registers (the pool of 384 x 168 less the producer's 128 x 32, in multiples of 8).
// DECODE-LABEL: gpu.func @attention_decode__sm90_attn
// DECODE-SAME: \22threads\22:384
// DECODE: nvvm.setmaxregister  decrease 32
// DECODE: nvvm.setmaxregister  increase 232
module {
  tile.kernel @attention_decode(in %Q: !tile.tensor<[B, H, T, 64], bf16>, in %K: !tile.tensor<[B, G, S, 64], bf16>, in %V: !tile.tensor<[B, G, S, 64], bf16>, out %O: !tile.tensor<[B, H, T, 64], bf16>) {
    %B = tile.dim "B"
    %H = tile.dim "H"
    %G = tile.dim "G"
    %S = tile.dim "S"
    %T = tile.dim "T"
    %c64 = arith.constant 64 : index
    %0 = arith.ceildivsi %T, %c64 : index
    tile.grid (%arg0, %arg1, %arg2) in (%0, %H, %B) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %1 = arith.maxsi %G, %c1 : index
      %2 = arith.floordivsi %H, %1 : index
      %c1_0 = arith.constant 1 : index
      %3 = arith.maxsi %2, %c1_0 : index
      %4 = arith.floordivsi %arg1, %3 : index
      %c64_1 = arith.constant 64 : index
      %5 = arith.muli %arg0, %c64_1 : index
      %6 = arith.subi %S, %T : index
      %7 = arith.addi %5, %6 : index
      %8 = tile.view %Q[%arg2, %arg1, %arg0, %c0] : <[B, H, T, 64], bf16> -> <64x64xbf16>
      %9 = tile.load %8 : <64x64xbf16> -> <64x64xbf16>
      %10 = tile.iota dim 0 : <64x64xf32>
      %11 = tile.splat %7 : index -> <64x64xf32>
      %12 = tile.add %10, %11 : <64x64xf32>
      %c64_2 = arith.constant 64 : index
      %13 = arith.ceildivsi %S, %c64_2 : index
      %c64_3 = arith.constant 64 : index
      %14 = arith.addi %7, %c64_3 : index
      %c64_4 = arith.constant 64 : index
      %15 = arith.ceildivsi %14, %c64_4 : index
      %16 = arith.minsi %13, %15 : index
      %17 = tile.full 0xFFF0000000000000 : <64xf32>
      %18 = tile.full 0.000000e+00 : <64xf32>
      %19 = tile.full 0.000000e+00 : <64x64xf32>
      %20:3 = tile.loop %arg3 to %16 stages 1 carry(%arg4 = %17 : !tile.tile<64xf32>, %arg5 = %18 : !tile.tile<64xf32>, %arg6 = %19 : !tile.tile<64x64xf32>) {
        %25 = tile.view %K[%arg2, %4, %arg3, %c0] : <[B, G, S, 64], bf16> -> <64x64xbf16>
        %26 = tile.load %25 : <64x64xbf16> -> <64x64xbf16>
        %27 = tile.transpose %26 : <64x64xbf16> -> <64x64xbf16>
        %28 = tile.full 0.000000e+00 : <64x64xf32>
        %29 = tile.dot %9, %27, %28 : <64x64xbf16>, <64x64xbf16> -> <64x64xf32>
        %30 = tile.scale %29, 0.18033688011112042 : <64x64xf32>
        %31 = tile.iota dim 1 : <64x64xf32>
        %c64_5 = arith.constant 64 : index
        %32 = arith.muli %arg3, %c64_5 : index
        %33 = tile.splat %32 : index -> <64x64xf32>
        %34 = tile.add %31, %33 : <64x64xf32>
        %35 = tile.splat %S : index -> <64x64xf32>
        %36 = tile.cmp "lt", %34, %35 : <64x64xf32>
        %37 = tile.cmp "le", %34, %12 : <64x64xf32>
        %38 = tile.mul %36, %37 : <64x64xf32>
        %39 = tile.full 0xFFF0000000000000 : <64x64xf32>
        %40 = tile.select %38, %30, %39 : <64x64xf32>
        %41 = tile.reduce_max %40 dim 1 : <64x64xf32> -> <64xf32>
        %42 = tile.max %arg4, %41 : <64xf32>
        %43 = tile.broadcast %42 [0] : <64xf32> -> <64x64xf32>
        %44 = tile.sub %40, %43 : <64x64xf32>
        %45 = tile.exp2 %44 : <64x64xf32>
        %46 = tile.sub %arg4, %42 : <64xf32>
        %47 = tile.exp2 %46 : <64xf32>
        %48 = tile.mul %arg5, %47 : <64xf32>
        %49 = tile.reduce_sum %45 dim 1 : <64x64xf32> -> <64xf32>
        %50 = tile.add %48, %49 : <64xf32>
        %51 = tile.cast %45 : <64x64xf32> -> <64x64xbf16>
        %52 = tile.view %V[%arg2, %4, %arg3, %c0] : <[B, G, S, 64], bf16> -> <64x64xbf16>
        %53 = tile.load %52 : <64x64xbf16> -> <64x64xbf16>
        %54 = tile.broadcast %47 [0] : <64xf32> -> <64x64xf32>
        %55 = tile.mul %arg6, %54 : <64x64xf32>
        %56 = tile.dot %51, %53, %55 : <64x64xbf16>, <64x64xbf16> -> <64x64xf32>
        tile.yield %42, %50, %56 : !tile.tile<64xf32>, !tile.tile<64xf32>, !tile.tile<64x64xf32>
      }
      %21 = tile.view %O[%arg2, %arg1, %arg0, %c0] : <[B, H, T, 64], bf16> -> <64x64xbf16>
      %22 = tile.broadcast %20#1 [0] : <64xf32> -> <64x64xf32>
      %23 = tile.div %20#2, %22 : <64x64xf32>
      %24 = tile.cast %23 : <64x64xf32> -> <64x64xbf16>
      tile.store %24, %21 : <64x64xbf16>, <64x64xbf16>
    }
  }
}

// -----

// Padded sequences (test::paddedAttention, head dim 64): each batch's length read from an
// i32 input (tile.read %Lens[%b]) and K and V windowed to it (window(0, len) along 2). The
// twin takes Lens as a pointer and stride, loads the length where its index expressions
// need it, and initialises one more mbarrier (`landed`) for the tiles that hold the
// window's end: the producer zeroes their rows past it, fences them for wgmma, then
// completes the stage.
// PADDED-LABEL: gpu.func @padded_attention__sm90_attn(%{{[a-z0-9]*}}: !llvm.ptr, %{{[a-z0-9]*}}: !llvm.ptr, %{{[a-z0-9]*}}: !llvm.ptr, %{{[a-z0-9]*}}: !llvm.ptr<1>, %{{[a-z0-9]*}}: i64, %{{[a-z0-9]*}}: i64, %{{[a-z0-9]*}}: i64, %{{[a-z0-9]*}}: !llvm.ptr<1>, %{{[a-z0-9]*}}: i64,
// PADDED-SAME: {\22arg\22:3,\22dim\22:0,\22kind\22:\22pointer\22},{\22arg\22:3,\22dim\22:0,\22kind\22:\22stride\22}
// PADDED: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// PADDED: nvvm.mbarrier.init
// PADDED: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// PADDED: nvvm.mbarrier.arrive
module {
  tile.kernel @padded_attention(in %Q: !tile.tensor<[B, H, S, 64], bf16>, in %K: !tile.tensor<[B, G, S, 64], bf16>, in %V: !tile.tensor<[B, G, S, 64], bf16>, in %Lens: !tile.tensor<[B], i32>, out %O: !tile.tensor<[B, H, S, 64], bf16>) {
    %B = tile.dim "B"
    %H = tile.dim "H"
    %G = tile.dim "G"
    %S = tile.dim "S"
    %c64 = arith.constant 64 : index
    %0 = arith.ceildivsi %S, %c64 : index
    tile.grid (%arg0, %arg1, %arg2) in (%0, %H, %B) {
      %c0 = arith.constant 0 : index
      %c2 = arith.constant 2 : index
      %1 = arith.floordivsi %arg1, %c2 : index
      %2 = tile.read %Lens[%arg2] : <[B], i32>
      %3 = arith.minsi %S, %2 : index
      %4 = tile.view %Q[%arg2, %arg1, %arg0, %c0] : <[B, H, S, 64], bf16> -> <64x64xbf16>
      %5 = tile.load %4 : <64x64xbf16> -> <64x64xbf16>
      %c64_0 = arith.constant 64 : index
      %6 = arith.muli %arg0, %c64_0 : index
      %7 = tile.splat %6 : index -> <64x64xf32>
      %8 = tile.iota dim 0 : <64x64xf32>
      %9 = tile.add %8, %7 : <64x64xf32>
      %10 = tile.splat %3 : index -> <64x64xf32>
      %11 = tile.full 0xFFF0000000000000 : <64xf32>
      %12 = tile.full 0.000000e+00 : <64xf32>
      %13 = tile.full 0.000000e+00 : <64x64xf32>
      %c64_1 = arith.constant 64 : index
      %14 = arith.ceildivsi %3, %c64_1 : index
      %15:3 = tile.loop %arg3 to %14 stages 1 carry(%arg4 = %11 : !tile.tile<64xf32>, %arg5 = %12 : !tile.tile<64xf32>, %arg6 = %13 : !tile.tile<64x64xf32>) {
        %20 = tile.view %K[%arg2, %1, %arg3, %c0] window(%c0, %3) along 2 : <[B, G, S, 64], bf16> -> <64x64xbf16>
        %21 = tile.load %20 : <64x64xbf16> -> <64x64xbf16>
        %22 = tile.view %V[%arg2, %1, %arg3, %c0] window(%c0, %3) along 2 : <[B, G, S, 64], bf16> -> <64x64xbf16>
        %23 = tile.load %22 : <64x64xbf16> -> <64x64xbf16>
        %24 = tile.full 0.000000e+00 : <64x64xf32>
        %25 = tile.transpose %21 : <64x64xbf16> -> <64x64xbf16>
        %26 = tile.dot %5, %25, %24 : <64x64xbf16>, <64x64xbf16> -> <64x64xf32>
        %27 = tile.scale %26, 1.250000e-01 : <64x64xf32>
        %c64_2 = arith.constant 64 : index
        %28 = arith.muli %arg3, %c64_2 : index
        %29 = tile.splat %28 : index -> <64x64xf32>
        %30 = tile.iota dim 1 : <64x64xf32>
        %31 = tile.add %30, %29 : <64x64xf32>
        %32 = tile.cmp "lt", %31, %10 : <64x64xf32>
        %33 = tile.full 0xFFF0000000000000 : <64x64xf32>
        %34 = tile.select %32, %27, %33 : <64x64xf32>
        %35 = tile.reduce_max %34 dim 1 : <64x64xf32> -> <64xf32>
        %36 = tile.max %arg4, %35 : <64xf32>
        %37 = tile.broadcast %36 [0] : <64xf32> -> <64x64xf32>
        %38 = tile.sub %34, %37 : <64x64xf32>
        %39 = tile.exp %38 : <64x64xf32>
        %40 = tile.sub %arg4, %36 : <64xf32>
        %41 = tile.exp %40 : <64xf32>
        %42 = tile.reduce_sum %39 dim 1 : <64x64xf32> -> <64xf32>
        %43 = tile.mul %arg5, %41 : <64xf32>
        %44 = tile.add %43, %42 : <64xf32>
        %45 = tile.broadcast %41 [0] : <64xf32> -> <64x64xf32>
        %46 = tile.mul %arg6, %45 : <64x64xf32>
        %47 = tile.cast %39 : <64x64xf32> -> <64x64xbf16>
        %48 = tile.dot %47, %23, %46 : <64x64xbf16>, <64x64xbf16> -> <64x64xf32>
        tile.yield %36, %44, %48 : !tile.tile<64xf32>, !tile.tile<64xf32>, !tile.tile<64x64xf32>
      }
      %16 = tile.broadcast %15#1 [0] : <64xf32> -> <64x64xf32>
      %17 = tile.div %15#2, %16 : <64x64xf32>
      %18 = tile.cast %17 : <64x64xf32> -> <64x64xbf16>
      %19 = tile.view %O[%arg2, %arg1, %arg0, %c0] : <[B, H, S, 64], bf16> -> <64x64xbf16>
      tile.store %18, %19 : <64x64xbf16>, <64x64xbf16>
    }
  }
}

// -----

// Sequences packed end to end (catalogue::attention_packed, head dim 64, the twin's 64 x 128
// tiles): Q, K, V, O of rank 3 ([heads, T, D]), every view windowed along dim 1 to the
// program's sequence (tile.read of two offsets, %b of the grid indexing no view). The twin
// takes O's two strides and the offsets' pointer; its CTAs go to sequence units (the query
// groups that hold a sequence's rows, `sequence_units`): in each role's loop, two CTA barriers
// a unit, warp 0 finding it (a running sum of each sequence's groups across the lanes,
// shuffled up) and thread 0 making the barriers anew (invalidated first after the first
// unit); TMA reads 3-D boxes at the window's start; no key splits.
// PACKED-LABEL: gpu.func @attention_packed__sm90_attn(%{{[a-z0-9]*}}: !llvm.ptr, %{{[a-z0-9]*}}: !llvm.ptr, %{{[a-z0-9]*}}: !llvm.ptr, %{{[a-z0-9]*}}: !llvm.ptr<1>, %{{[a-z0-9]*}}: i64, %{{[a-z0-9]*}}: i64, %{{[a-z0-9]*}}: !llvm.ptr<1>, %{{[a-z0-9]*}}: i64, %{{[a-z0-9]*}}: i32,
// PACKED-SAME: {\22arg\22:3,\22dim\22:0,\22less\22:1,\22name\22:\22B1\22,\22tile\22:1}
// PACKED-SAME: \22no_key_splits\22:\22its queries are windowed
// PACKED-SAME: \22sequence_units\22:true
// PACKED: gpu.grid_dim x
// PACKED: scf.while
// PACKED: nvvm.barrier id = %{{.*}} number_of_threads = %{{.*}}
// PACKED: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// PACKED: gpu.shuffle up
// PACKED: nvvm.mbarrier.inval
// PACKED: nvvm.mbarrier.init
// PACKED: nvvm.barrier id
// PACKED: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, box[%{{[a-z0-9_]*}}, %{{[a-z0-9_]*}}, %{{[a-z0-9_]*}}] :
// PACKED: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
module {
  tile.kernel @attention_packed(in %Q: !tile.tensor<[H, T, 64], bf16>, in %K: !tile.tensor<[G, T, 64], bf16>, in %V: !tile.tensor<[G, T, 64], bf16>, in %Offsets: !tile.tensor<[B1], i32>, out %O: !tile.tensor<[H, T, 64], bf16>) {
    %H = tile.dim "H"
    %G = tile.dim "G"
    %T = tile.dim "T"
    %B1 = tile.dim "B1"
    %c64 = arith.constant 64 : index
    %0 = arith.ceildivsi %T, %c64 : index
    %c1 = arith.constant 1 : index
    %1 = arith.subi %B1, %c1 : index
    tile.grid (%arg0, %arg1, %arg2) in (%0, %H, %1) {
      %c0 = arith.constant 0 : index
      %c1_0 = arith.constant 1 : index
      %2 = arith.maxsi %G, %c1_0 : index
      %3 = arith.floordivsi %H, %2 : index
      %c1_1 = arith.constant 1 : index
      %4 = arith.maxsi %3, %c1_1 : index
      %5 = arith.floordivsi %arg1, %4 : index
      %6 = tile.read %Offsets[%arg2] : <[B1], i32>
      %c1_2 = arith.constant 1 : index
      %7 = arith.addi %arg2, %c1_2 : index
      %8 = tile.read %Offsets[%7] : <[B1], i32>
      %9 = arith.subi %8, %6 : index
      %10 = tile.view %Q[%arg1, %arg0, %c0] window(%6, %9) along 1 : <[H, T, 64], bf16> -> <64x64xbf16>
      %11 = tile.load %10 : <64x64xbf16> -> <64x64xbf16>
      %c64_3 = arith.constant 64 : index
      %12 = arith.muli %arg0, %c64_3 : index
      %c128 = arith.constant 128 : index
      %13 = arith.ceildivsi %9, %c128 : index
      %c64_4 = arith.constant 64 : index
      %14 = arith.ceildivsi %9, %c64_4 : index
      %15 = arith.subi %14, %arg0 : index
      %16 = arith.muli %15, %13 : index
      %17 = arith.minsi %13, %16 : index
      %18 = tile.iota dim 0 : <64x128xf32>
      %19 = tile.splat %12 : index -> <64x128xf32>
      %20 = tile.add %18, %19 : <64x128xf32>
      %21 = tile.full 0xFFF0000000000000 : <64xf32>
      %22 = tile.full 0.000000e+00 : <64xf32>
      %23 = tile.full 0.000000e+00 : <64x64xf32>
      %24:3 = tile.loop %arg3 to %17 stages 1 carry(%arg4 = %21 : !tile.tile<64xf32>, %arg5 = %22 : !tile.tile<64xf32>, %arg6 = %23 : !tile.tile<64x64xf32>) {
        %29 = tile.view %K[%5, %arg3, %c0] window(%6, %9) along 1 : <[G, T, 64], bf16> -> <128x64xbf16>
        %30 = tile.load %29 : <128x64xbf16> -> <128x64xbf16>
        %31 = tile.transpose %30 : <128x64xbf16> -> <64x128xbf16>
        %32 = tile.full 0.000000e+00 : <64x128xf32>
        %33 = tile.dot %11, %31, %32 : <64x64xbf16>, <64x128xbf16> -> <64x128xf32>
        %34 = tile.scale %33, 0.18033688011112042 : <64x128xf32>
        %35 = tile.iota dim 1 : <64x128xf32>
        %c128_5 = arith.constant 128 : index
        %36 = arith.muli %arg3, %c128_5 : index
        %37 = tile.splat %36 : index -> <64x128xf32>
        %38 = tile.add %35, %37 : <64x128xf32>
        %39 = tile.splat %9 : index -> <64x128xf32>
        %40 = tile.cmp "lt", %38, %39 : <64x128xf32>
        %41 = tile.full 0xFFF0000000000000 : <64x128xf32>
        %42 = tile.select %40, %34, %41 : <64x128xf32>
        %43 = tile.reduce_max %42 dim 1 : <64x128xf32> -> <64xf32>
        %44 = tile.max %arg4, %43 : <64xf32>
        %45 = tile.broadcast %44 [0] : <64xf32> -> <64x128xf32>
        %46 = tile.sub %42, %45 : <64x128xf32>
        %47 = tile.exp2 %46 : <64x128xf32>
        %48 = tile.sub %arg4, %44 : <64xf32>
        %49 = tile.exp2 %48 : <64xf32>
        %50 = tile.mul %arg5, %49 : <64xf32>
        %51 = tile.reduce_sum %47 dim 1 : <64x128xf32> -> <64xf32>
        %52 = tile.add %50, %51 : <64xf32>
        %53 = tile.cast %47 : <64x128xf32> -> <64x128xbf16>
        %54 = tile.view %V[%5, %arg3, %c0] window(%6, %9) along 1 : <[G, T, 64], bf16> -> <128x64xbf16>
        %55 = tile.load %54 : <128x64xbf16> -> <128x64xbf16>
        %56 = tile.broadcast %49 [0] : <64xf32> -> <64x64xf32>
        %57 = tile.mul %arg6, %56 : <64x64xf32>
        %58 = tile.dot %53, %55, %57 : <64x128xbf16>, <128x64xbf16> -> <64x64xf32>
        tile.yield %44, %52, %58 : !tile.tile<64xf32>, !tile.tile<64xf32>, !tile.tile<64x64xf32>
      }
      %25 = tile.view %O[%arg1, %arg0, %c0] window(%6, %9) along 1 : <[H, T, 64], bf16> -> <64x64xbf16>
      %26 = tile.broadcast %24#1 [0] : <64xf32> -> <64x64xf32>
      %27 = tile.div %24#2, %26 : <64x64xf32>
      %28 = tile.cast %27 : <64x64xf32> -> <64x64xbf16>
      tile.store %28, %25 : <64x64xbf16>, <64x64xbf16>
    }
  }
}
