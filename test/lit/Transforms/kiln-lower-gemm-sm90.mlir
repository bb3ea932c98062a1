// RUN: kiln-opt %s --split-input-file --kiln-lower-gemm-sm90 | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="tile-n=256 stages=3" | FileCheck %s --check-prefix=N256
// RUN: kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="tile-n=128" | FileCheck %s --check-prefix=ONE
// RUN: kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="tile-n=256 cluster=2" | FileCheck %s --check-prefix=CL
// RUN: kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="tile-n=128" | FileCheck %s --check-prefix=DESC
// RUN: kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="tile-n=128" | FileCheck %s --check-prefix=SK
// RUN: kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="tile-n=128 cluster=2" | FileCheck %s --check-prefix=SKCL
// RUN: kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="tile-n=128 raster-group=16" | FileCheck %s --check-prefix=RASTER
// RUN: not kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="raster-group=65" 2>&1 | FileCheck %s --check-prefix=BADRASTER
// RUN: kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="tile-m=64" | FileCheck %s --check-prefix=M64
// RUN: kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="tile-n=128 tile-m=128 cluster=2 cluster-m=true" | FileCheck %s --check-prefix=CLM
// RUN: not kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="cluster-m=true" 2>&1 | FileCheck %s --check-prefix=BADCLM
// RUN: kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="tile-m=64 tile-n=192 cluster=2 cluster-m=true" | FileCheck %s --check-prefix=N192
// RUN: kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="tile-n=192 cluster=0" | FileCheck %s --check-prefix=N192ALL
// RUN: not kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="tile-n=96" 2>&1 | FileCheck %s --check-prefix=BADN
// RUN: kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="cluster=0" | FileCheck %s --check-prefix=PAIRS

// Clusters left to kiln: the 128 x 128 and 64 x 128 tiles alone and in stacked pairs (each
// CTA multicasting its half of B to both), the 128 x 128 one also in fours side by side
// (each CTA multicasting a quarter of A's rows, 32, to all four, on a ring of 5), the
// 128 x 256 and 128 x 192 tiles alone, the tall 256 x 128 tile alone and in stacked pairs.
// PAIRS: gpu.func @mm__sm90(
// PAIRS-SAME: \22cluster\22:1,
// PAIRS: gpu.func @mm__sm90x2(
// PAIRS-SAME: \22cluster\22:2,\22cluster_m\22:true
// PAIRS-SAME: \22tile\22:[128,128,64]
// PAIRS: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} multicast_mask
// PAIRS: gpu.func @mm__sm90x4(
// PAIRS-SAME: \22cluster\22:4,\22cluster_m\22:false
// PAIRS-SAME: \22params\22:[{\22arg\22:0,\22box\22:[64,32],
// PAIRS-SAME: \22stages\22:5,
// PAIRS-SAME: \22tile\22:[128,128,64]
// PAIRS: %[[MASK:.*]] = arith.constant 15 : i16
// PAIRS: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} multicast_mask = %[[MASK]]
// PAIRS: gpu.func @mm__sm90_n256(
// PAIRS-SAME: \22cluster\22:1,
// PAIRS: gpu.func @mm__sm90_m64(
// PAIRS: gpu.func @mm__sm90_m64x2(
// PAIRS: gpu.func @mm__sm90_n192(
// PAIRS-SAME: \22cluster\22:1,
// PAIRS-SAME: \22tile\22:[128,192,64]
// PAIRS: gpu.func @mm__sm90_m64n192x2(
// PAIRS-SAME: \22cluster\22:2,\22cluster_m\22:true
// PAIRS-SAME: \22threads\22:256
// PAIRS-SAME: \22tile\22:[64,192,64]
// PAIRS: gpu.func @mm__sm90_m256(
// PAIRS-SAME: \22cluster\22:1,
// PAIRS-SAME: \22threads\22:384
// PAIRS-SAME: \22tile\22:[256,128,64]
// PAIRS: gpu.func @mm__sm90_m256x2(
// PAIRS-SAME: \22cluster\22:2,\22cluster_m\22:true
// PAIRS-SAME: \22threads\22:384
// PAIRS-SAME: \22tile\22:[256,128,64]
// PAIRS-NOT: gpu.func
// RUN: kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="cluster=0 decode-rows=16" | FileCheck %s --check-prefix=DEC
// RUN: kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="cluster=0 wide-rows=96" | FileCheck %s --check-prefix=WIDE
// RUN: not kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="wide-rows=72" 2>&1 | FileCheck %s --check-prefix=BADWIDE

// With decode-rows=16, kiln's tiles are followed by the decode twin: 16 x 64 tiles of C,
// computed as C^T = B^T A^T (wgmma m64n16k16, its A the B box read transposed, its B A's
// rows), one consumer warpgroup, an 8-stage ring, C stored by pointer (no tensor map); split
// along K in clusters of up to 4 whose size the launch gives (no workspace): rank 0 waits for
// its peers' sums (acquire at cluster scope), each peer stores them into its shared memory.
// DEC: gpu.func @mm__sm90_m64x2(
// DEC: gpu.func @mm__sm90_dec(
// DEC-SAME: \22k_cluster\22:4
// DEC-SAME: \22kind\22:\22pointer\22
// DEC-NOT: \22kind\22:\22workspace\22
// DEC-SAME: \22stages\22:8
// DEC-SAME: \22threads\22:256
// DEC-SAME: \22tile\22:[16,64,64]
// DEC: nvvm.read.ptx.sreg.cluster.nctarank
// DEC: nvvm.read.ptx.sreg.cluster.ctarank
// DEC: nvvm.cluster.arrive.relaxed
// DEC: nvvm.cluster.wait
// DEC: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 16, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <col>]
// DEC: llvm.inline_asm has_side_effects {{.*}}mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64
// DEC: nvvm.mapa
// DEC: nvvm.mbarrier.arrive {{.*}}{scope = #nvvm.mem_scope<cluster>}
// DEC-NOT: gpu.func

// Swapped twins of 128 columns (wide-rows): after the others, 80 and 96 rows of C, computed
// as C^T = B^T A^T by two consumer warpgroups (384 threads) of 64 columns each (wgmma's N
// is C's rows), whole tiles: no K-clusters, no split-K reduction.
// WIDE: gpu.func @mm__sm90_m64x2(
// WIDE: gpu.func @mm__sm90_sw80(
// WIDE-SAME: \22k_cluster\22:1
// WIDE-SAME: \22reduction\22:{\22arg\22:-1
// WIDE-SAME: \22swap_ab\22:true
// WIDE-SAME: \22threads\22:384
// WIDE-SAME: \22tile\22:[80,128,64]
// WIDE: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 80, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <col>]
// WIDE: gpu.func @mm__sm90_sw96(
// WIDE-SAME: \22tile\22:[96,128,64]
// WIDE: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 96, k = 16>
// WIDE-NOT: gpu.func
// BADWIDE: wide-rows must be 0, 80, 96, 112 or 128, got 72

// 192-wide tiles: three B boxes, which a stacked pair cannot halve: each CTA loads (and
// multicasts) box rank, then box 2 + rank where that lies inside the tile (rank 0 only).
// N192: gpu.func @mm__sm90(
// N192-SAME: \22cluster\22:2,\22cluster_m\22:true
// N192-SAME: \22tile\22:[64,192,64]
// N192: %[[RANK:[0-9]+]] = arith.remui %{{.*}}, %c2_i32 : i32
// N192: %[[H0:[0-9]+]] = arith.addi %c0_i32{{.*}}, %[[RANK]] : i32
// N192: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} multicast_mask
// N192: %[[H1:[0-9]+]] = arith.addi %c2_i32{{.*}}, %[[RANK]] : i32
// N192: %[[IN:[0-9]+]] = arith.cmpi ult, %[[H1]], %c3_i32 : i32
// N192-NEXT: scf.if %[[IN]]
// N192: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} multicast_mask
// N192-NOT: multicast_mask
// N192: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 192, k = 16>
// Asked for by tile-n with clusters left to kiln: both heights, the 64-row one also in
// stacked pairs.
// N192ALL: gpu.func @mm__sm90_n192(
// N192ALL: gpu.func @mm__sm90_m64n192(
// N192ALL: gpu.func @mm__sm90_m64n192x2(
// BADN: tile-n must be 0, 128, 192 or 256, got 96

// Clusters along M: A's box is the whole tile (no share), the plan says so, and each CTA
// multicasts its one B box (of two) to both.
// CLM: gpu.func @mm__sm90(
// CLM-SAME: \22cluster\22:2,\22cluster_m\22:true
// CLM-SAME: \22params\22:[{\22arg\22:0,\22box\22:[64,128],\22dim\22:0,\22kind\22:\22tensormap\22}
// CLM-COUNT-1: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} multicast_mask
// CLM-NOT: multicast_mask
// BADCLM: cluster-m pairs tiles in clusters: it needs cluster 2, got 1
// RUN: kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="tile-m=64 tile-n=256" | FileCheck %s --check-prefix=PP
// RUN: not kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="tile-m=32" 2>&1 | FileCheck %s --check-prefix=BADM
// RUN: kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="tile-m=256" | FileCheck %s --check-prefix=TALL
// RUN: not kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="tile-m=256 cluster=2" 2>&1 | FileCheck %s --check-prefix=BADTALL
// RUN: kiln-opt %s --split-input-file --kiln-lower-gemm-sm90="tile-m=256 cluster=2 cluster-m=true" | FileCheck %s --check-prefix=TALLCLM

// The tall 256 x 128 tile: A's box 256 rows; two consumer warpgroups (384 threads) of 128 rows,
// each two m64n128 products per k16 step on the same B, the second on A's rows 64 further
// (64 rows x 128 B: descriptor + 512); no split-K parameters. It runs alone.
// TALL: gpu.func @mm__sm90(
// TALL-SAME: \22tile\22:256
// TALL-SAME: \22params\22:[{\22arg\22:0,\22box\22:[64,256],\22dim\22:0,\22kind\22:\22tensormap\22}
// TALL-NOT: workspace
// TALL-SAME: \22threads\22:384
// TALL-SAME: \22tile\22:[256,128,64]
// TALL: nvvm.setmaxregister decrease 24
// TALL: [[DA:%[0-9]+]] = arith.ori %c{{[0-9]+}}_i64, %{{[0-9]+}} : i64
// TALL: [[DB:%[0-9]+]] = arith.ori %c{{[0-9]+}}_i64, %{{[0-9]+}} : i64
// TALL: nvvm.wgmma.mma_async [[DA]], [[DB]], %{{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <zero>]
// TALL: [[DA1:%[0-9]+]] = arith.addi [[DA]], %c512_i64 : i64
// TALL: nvvm.wgmma.mma_async [[DA1]], [[DB]], %{{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <zero>]
// TALL-NOT: gpu.func @mm__sm90_
// BADTALL: cluster must be 0, 1, or 2 with cluster-m at tile-m 256 (the tall tile runs alone or in stacked pairs), got 2
// In stacked pairs (kiln's choice for it): each CTA loads its own 256 rows of A and one of
// B's two 64-column boxes, multicast to both.
// TALLCLM: gpu.func @mm__sm90(
// TALLCLM-SAME: \22cluster\22:2,\22cluster_m\22:true
// TALLCLM-SAME: \22params\22:[{\22arg\22:0,\22box\22:[64,256],\22dim\22:0,\22kind\22:\22tensormap\22}
// TALLCLM-SAME: \22threads\22:384
// TALLCLM-SAME: \22tile\22:[256,128,64]
// TALLCLM-COUNT-1: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} multicast_mask
// TALLCLM-NOT: multicast_mask
// TALLCLM-NOT: gpu.func @mm__sm90_

// The 64-row tile: one consumer warpgroup (256 threads: no setmaxnreg needed, each may hold
// 255 registers), A's box 64 rows, a ring of 8 stages of 24 KiB, 128 arrivals free a slot.
// M64: gpu.func @mm__sm90(
// M64-SAME: \22params\22:[{\22arg\22:0,\22box\22:[64,64],\22dim\22:0,\22kind\22:\22tensormap\22}
// M64-SAME: \22stages\22:8
// M64-SAME: \22threads\22:256
// M64-SAME: \22tile\22:[64,128,64]
// M64-NOT: nvvm.setmaxregister
// M64: nvvm.mbarrier.init %{{.*}}, %{{.*}} : !llvm.ptr<3>, i32
// M64: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>
// M64-NOT: gpu.func @mm__sm90_m64
// The 64 x 256 tile is ping-pong: two consumer warpgroups (384 threads) each on a whole tile,
// taking the CTA's tiles in turn; a ring slot is read by one of them (128 arrivals free it).
// A consumer waits for its turn (named barrier 3 + c, 256 threads: the other consumer's
// arrive) before its main loop, and hands it on after.
// PP: gpu.func @mm__sm90(
// PP-SAME: \22stages\22:4
// PP-SAME: \22threads\22:384
// PP-SAME: \22tile\22:[64,256,64]
// PP: nvvm.mbarrier.init %{{.*}}, %c128_i32{{.*}} : !llvm.ptr<3>, i32
// PP: nvvm.setmaxregister decrease 24
// PP: nvvm.setmaxregister increase 240
// PP: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} : i32
// PP: nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// PP: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 256, k = 16>
// PP: nvvm.barrier.arrive id = %{{.*}} number_of_threads = %c256_i32
// PP: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// PP: nvvm.cp.async.bulk.tensor.global.shared.cta
// BADM: tile-m must be 0, 64, 128 or 256, got 32

// The tile order: groups of raster-group tile rows (8 unless set), recorded in the plan.
// RASTER: \22raster\22:16
// BADRASTER: raster-group must be 0..64, got 65

// Split-K: the work loop (whole tiles, then this CTA's chunks of the split tiles); a chunk's
// sums go to the workspace as 16-byte stores, one thread per warpgroup counts them in
// between two device-wide fences, and the last chunk's warpgroup reads every chunk back
// (volatile: other SMs wrote them).
// SK: scf.while
// SK: llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<1>
// SK: nvvm.memory.barrier <gpu>
// SK: llvm.atomicrmw add %{{.*}} monotonic : !llvm.ptr<1>, i32
// SK: nvvm.memory.barrier <gpu>
// SK: llvm.load volatile %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
// Clusters take whole tiles: no split-K parameters, no work loop of that kind.
// SKCL-NOT: split_tiles
// SKCL-NOT: scf.while

// A GEMM with a bias + ReLU epilogue, as the DSL traces it (composites already expanded):
// it gets a TMA + wgmma twin beside the tile kernel, which stays for the portable lowering.

// CHECK: module attributes {gpu.container_module}
// CHECK: tile.kernel @mm
// CHECK: gpu.module @kiln
// CHECK: llvm.mlir.global external @kiln_sm90_smem() {addr_space = 3 : i32, alignment = 1024 : i64}
// The parameters: tensor maps of A, B and C (bf16: stored by TMA), C's pointer and row stride (the
// last row of tiles, moved up inside A, stores part of its rows from registers), the bias and its
// stride, M, N, K, then split-K's workspace, split tiles and chunks per tile.
// CHECK: gpu.func @mm__sm90(%{{[a-z0-9]*}}: !llvm.ptr, %{{[a-z0-9]*}}: !llvm.ptr, %{{[a-z0-9]*}}: !llvm.ptr, %{{[a-z0-9]*}}: !llvm.ptr<1>, %{{[a-z0-9]*}}: i64, %{{[a-z0-9]*}}: !llvm.ptr<1>, %{{[a-z0-9]*}}: i64, %{{[a-z0-9]*}}: i32, %{{[a-z0-9]*}}: i32, %{{[a-z0-9]*}}: i32, %{{[a-z0-9]*}}: !llvm.ptr<1>, %{{[a-z0-9]*}}: i32, %{{[a-z0-9]*}}: i32) kernel
// CHECK-SAME: kiln.launch_plan = "{{.*}}\22entry\22:\22mm__sm90\22
// CHECK-SAME: \22output\22:3
// CHECK-SAME: \22kind\22:\22tensormap\22
// CHECK-SAME: \22kind\22:\22workspace\22
// CHECK-SAME: \22kind\22:\22split_tiles\22
// CHECK-SAME: \22kind\22:\22k_splits\22
// CHECK-SAME: \22raster\22:8
// CHECK-SAME: \22reduction\22:{\22arg\22:0,\22dim\22:1,\22name\22:\22K\22,\22tile\22:64}
// CHECK-SAME: \22shared_bytes\22:230512
// CHECK-SAME: \22stages\22:6
// CHECK-SAME: \22threads\22:384
// CHECK-SAME: \22tile\22:[128,128,64]
// Its layouts: A's stages K-major and B's MN-major in 128-byte swizzled rows, the wgmma
// accumulator, C's staging boxes.
// CHECK-SAME: kiln.layouts = {a = #tile.nvmma_shared<swizzle = 128, major = "k">, acc = #tile.wgmma<m = 64, n = 128>, b = #tile.nvmma_shared<swizzle = 128, major = "mn">, c = #tile.nvmma_shared<swizzle = 128, major = "mn">}
// CHECK-SAME: known_block_size = array<i32: 384, 1, 1>
// CHECK-SAME: nvvm.minctasm = 1 : i32
// Barriers: 6 full (1 arrival + bytes) and 6 empty (256 consumer threads), by thread 0.
// CHECK-COUNT-12: nvvm.mbarrier.init %{{.*}}, %{{.*}} : !llvm.ptr<3>, i32
// CHECK: nvvm.fence.mbarrier.init
// CHECK: gpu.barrier
// The producer warpgroup gives registers away; one thread issues A's box and B's two.
// CHECK: nvvm.setmaxregister decrease 24
// CHECK-COUNT-3: nvvm.prefetch tensormap in_param_space
// L2 policies: A's tiles are read by tilesN CTAs, B's by tilesM. Where the operand read more
// often (its M or N rows x K x 2 bytes) fits 12 MiB, it is evict_last (0x14F0000000000000)
// and the other evict_first (0x12F0000000000000); else both evict_normal (0x1000000000000000).
// CHECK: [[REUSED:%[0-9]+]] = arith.cmpi uge, %{{.*}}, %{{.*}} : i32
// CHECK: arith.select [[REUSED]], %arg7, %arg8 : i32
// CHECK: [[FITS:%[0-9]+]] = arith.cmpi ule, %{{.*}}, %c12582912_i64 : i64
// CHECK: [[LA:%[0-9]+]] = arith.select [[REUSED]], %c1508705875169116160_i64{{[_0-9]*}}, %c1364590687093260288_i64{{[_0-9]*}} : i64
// CHECK: [[PA:%[0-9]+]] = arith.select [[FITS]], [[LA]], %c1152921504606846976_i64{{[_0-9]*}} : i64
// CHECK: [[LB:%[0-9]+]] = arith.select [[REUSED]], %c1364590687093260288_i64{{[_0-9]*}}, %c1508705875169116160_i64{{[_0-9]*}} : i64
// CHECK: [[PB:%[0-9]+]] = arith.select [[FITS]], [[LB]], %c1152921504606846976_i64{{[_0-9]*}} : i64
// The last row of tiles moves up inside A where C has 128 rows or more (min(m0, M - 128)),
// the last column left inside B where it has 128 columns or more (min(n0, N - 128)): TMA
// reads no row past A's last, no column past B's.
// CHECK: [[ROOM:%[0-9]+]] = arith.cmpi ule, %c128_i32{{[_0-9]*}}, %arg7 : i32
// CHECK: arith.minui
// CHECK: [[AM0:%[0-9]+]] = arith.select [[ROOM]]
// CHECK: [[NROOM:%[0-9]+]] = arith.cmpi ule, %c128_i32{{[_0-9]*}}, %arg8 : i32
// CHECK: arith.minui
// CHECK: [[BN0:%[0-9]+]] = arith.select [[NROOM]]
// CHECK: scf.for
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.mbarrier.arrive.expect_tx
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0, %{{.*}}, box[%{{.*}}, [[AM0]]] l2_cache_hint = [[PA]]
// CHECK: [[B0:%[0-9]+]] = arith.addi [[BN0]], %c0_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1, %{{.*}}, box[[[B0]], %{{.*}}] l2_cache_hint = [[PB]]
// CHECK: [[B1:%[0-9]+]] = arith.addi [[BN0]], %c64_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1, %{{.*}}, box[[[B1]], %{{.*}}] l2_cache_hint = [[PB]]
// The consumers: k-tile 0 peeled (the first wgmma zeroes the accumulator), then the loop.
// CHECK: nvvm.setmaxregister increase 240
// Per tile, the bias where each of the thread's columns lives, loaded before the main loop
// (the loop hides the loads' latency from the epilogue).
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> bf16
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
// CHECK-COUNT-3: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>, D[<f32>, <one>]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: scf.for
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: nvvm.mbarrier.arrive
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// The epilogue on the fragments: no loads of its own, max(x, 0), bf16 pairs into a swizzled
// 64 x 64 staging box, then one thread per warpgroup stores it by TMA.
// CHECK-NOT: llvm.load %{{.*}} : !llvm.ptr<1> -> bf16
// CHECK: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %{{.*}}
// CHECK: arith.maximumf
// CHECK: arith.truncf %{{.*}} : vector<2xf32> to vector<2xbf16>
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : i32, !llvm.ptr<3>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: nvvm.cp.async.bulk.tensor.global.shared.cta
// CHECK: nvvm.cp.async.bulk.commit.group
// CHECK: nvvm.cp.async.bulk.wait_group 1 {read}
// On the edge tiles, a tile moved up or left copies its staged box's part from row m0 and column
// n0 on to C itself, 16 bytes at a time through C's pointer (a TMA store would write the rows
// before m0 and the columns before n0 too).
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// CHECK: llvm.getelementptr %arg3[%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, bf16
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// Other edge tiles store by TMA. Box 1 is skipped where it lies wholly right of C or left of
// n0 (a tile moved left): boxCol < N and n0 < boxCol + 64.
// CHECK: nvvm.cp.async.bulk.tensor.global.shared.cta
// CHECK: [[BOXCOL:%[0-9]+]] = arith.addi %{{.*}}, %c64_i32
// CHECK: [[RIGHT:%[0-9]+]] = arith.cmpi ult, [[BOXCOL]], %arg8 : i32
// CHECK: [[END:%[0-9]+]] = arith.addi [[BOXCOL]], %c64_i32
// CHECK: [[LEFT:%[0-9]+]] = arith.cmpi ult, %{{.*}}, [[END]] : i32
// CHECK: [[SOME:%[0-9]+]] = arith.andi [[RIGHT]], [[LEFT]] : i1
// CHECK-NEXT: scf.if [[SOME]] {
// The last stores have read shared memory before the CTA exits (their writes complete with the kernel).
// CHECK: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK-NOT: nvvm.cp.async.bulk.wait_group 0{{ *$}}
// CHECK: gpu.return
// Without tile-n, the 128 x 256 twin follows, for launches with enough tiles to fill the GPU.
// CHECK: gpu.func @mm__sm90_n256(
// CHECK-SAME: \22stages\22:4
// CHECK-SAME: \22tile\22:[128,256,64]
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 256, k = 16>
// And the 64 x 128 twin, for C with at most 64 rows (decode shapes).
// CHECK: gpu.func @mm__sm90_m64(
// CHECK-SAME: \22threads\22:256
// CHECK-SAME: \22tile\22:[64,128,64]
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>

// N256: gpu.func @mm__sm90(
// N256-SAME: \22stages\22:3
// N256-SAME: \22tile\22:[128,256,64]
// N256: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 256, k = 16>
// N256-NOT: gpu.func @mm__sm90_n256

// The wgmma descriptors' fixed bits come from the shared layouts: A K-major (leading byte
// offset 16, stride 1024 = one 8-row atom, 128B swizzle: 2^62 + 64 * 2^32 + 1 * 2^16), B
// MN-major (leading byte offset 8192, the distance between its 64-column boxes: 512 * 2^16).
// DESC: arith.constant 4611686293305360384 : i64
// DESC: arith.constant 4611686293338849280 : i64

// A width asked for: that twin alone.
// ONE: gpu.func @mm__sm90(
// ONE-NOT: gpu.func @mm__sm90_n256

// Clusters of 2: A's tensor map box is half the rows; the peers' barriers are set up before
// any use (a relaxed arrive after their init, a wait in each role before it touches the
// peer, the producer's after prefetching its tensor maps); each CTA multicasts its half of A
// to both; consumer warps free a slot in both CTAs.
// CL: gpu.func @mm__sm90(
// CL-SAME: \22cluster\22:2
// CL-SAME: \22params\22:[{\22arg\22:0,\22box\22:[64,64],\22dim\22:0,\22kind\22:\22tensormap\22}
// CL: nvvm.fence.mbarrier.init
// CL: nvvm.cluster.arrive.relaxed
// CL-NOT: gpu.barrier
// CL: nvvm.prefetch tensormap
// CL: nvvm.cluster.wait
// CL: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} multicast_mask
// A consumer waits before its first k-step.
// CL: nvvm.cluster.wait
// A consumer frees a stage in both CTAs, at CTA scope (cluster scope would be a full fence
// before every arrive), and only where a producer waits for it: not the CTA's last 4
// (stages) k-steps. So no arrival on a peer is in flight when it leaves, and no cluster
// barrier ends the kernel.
// CL: %[[RING:.*]] = arith.addi %{{.*}}, %c4_i32{{.*}} : i32
// CL-NEXT: %[[AWAITED:.*]] = arith.cmpi ult, %[[RING]], %{{.*}} : i32
// CL-NEXT: scf.if %[[AWAITED]] {
// CL: nvvm.mapa
// CL: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<7>{{$}}
// CL-NOT: nvvm.cluster
// CL: gpu.return
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

// -----

// A reads A at (k, i): not the GEMM shape the twin computes. No twin; the module says why.
// CHECK: module attributes {kiln.sm90 = "kernel 'at': A is not read at (i, k) and B at (k, j)"}
// CHECK-NOT: gpu.func
module {
  tile.kernel @at(in %A: !tile.tensor<[K, M], bf16>, in %B: !tile.tensor<[K, N], bf16>, out %C: !tile.tensor<[M, N], f32>) {
    %M = tile.dim "M"
    %N = tile.dim "N"
    %K = tile.dim "K"
    %c64 = arith.constant 64 : index
    %gm = arith.ceildivsi %M, %c64 : index
    %gn = arith.ceildivsi %N, %c64 : index
    tile.grid (%i, %j) in (%gm, %gn) {
      %kt = arith.ceildivsi %K, %c64 : index
      %z = tile.full 0.000000e+00 : <64x64xf32>
      %acc = tile.loop %kk to %kt stages 2 carry(%c = %z : !tile.tile<64x64xf32>) {
        %va = tile.view %A[%kk, %i] : <[K, M], bf16> -> <64x64xbf16>
        %a = tile.load %va : <64x64xbf16> -> <64x64xbf16>
        %vb = tile.view %B[%kk, %j] : <[K, N], bf16> -> <64x64xbf16>
        %b = tile.load %vb : <64x64xbf16> -> <64x64xbf16>
        %d = tile.dot %a, %b, %c : <64x64xbf16>, <64x64xbf16> -> <64x64xf32>
        tile.yield %d : !tile.tile<64x64xf32>
      }
      %vc = tile.view %C[%i, %j] : <[M, N], f32> -> <64x64xf32>
      tile.store %acc, %vc : <64x64xf32>, <64x64xf32>
    }
  }
}
