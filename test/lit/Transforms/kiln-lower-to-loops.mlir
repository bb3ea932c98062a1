// kiln-lower-to-loops: tile kernels become func.func over strided memrefs, with scf.for
// nests, one buffer per tile value (allocated at entry, freed before return) and f32 math.
// split-file separates the kernels that lower (after kiln-expand-composites) from the ones
// kiln-lower-to-loops must reject on its own (checked with -verify-diagnostics).
//
// RUN: split-file %s %t --leading-lines
// RUN: kiln-opt %t/lower.mlir --pass-pipeline='builtin.module(tile.kernel(kiln-expand-composites),kiln-lower-to-loops)' | FileCheck %s
// RUN: kiln-opt %t/lower.mlir --pass-pipeline='builtin.module(tile.kernel(kiln-expand-composites),kiln-lower-to-loops)' | FileCheck %s --check-prefix=NOTILE
// RUN: kiln-opt %t/errors.mlir -split-input-file -verify-diagnostics --kiln-lower-to-loops

// Nothing of the tile dialect is left.
// NOTILE-NOT: tile.

//--- lower.mlir

// A bf16 relu: masked load (padding fill, then the in-bounds part), relu expanded to
// max(x, 0) computed in f32, masked store.
// CHECK-LABEL: func.func @relu_bf16(
// CHECK-SAME:    %[[X:[^:]+]]: memref<?x?xbf16, strided<[?, ?], offset: ?>>,
// CHECK-SAME:    %[[Y:[^:]+]]: memref<?x?xbf16, strided<[?, ?], offset: ?>>) {
// Every tile buffer is allocated at the function entry, before anything else.
// CHECK-NEXT:  %[[XT:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4x8xbf16>
// CHECK-NEXT:  %[[ZT:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4x8xbf16>
// CHECK-NEXT:  %[[RT:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4x8xbf16>
// CHECK-NOT:   memref.alloc
// tile.dim "M" is the runtime extent of X's dim 0; the grid is a loop over ceil(M / 4).
// CHECK:       %[[M:.+]] = memref.dim %[[X]], %c0 : memref<?x?xbf16, strided<[?, ?], offset: ?>>
// CHECK-NEXT:  %[[GM:.+]] = arith.ceildivsi %[[M]], %c4 : index
// CHECK:       scf.for %[[I:.+]] = %{{.+}} to %[[GM]] step %{{.+}} {
// The view's element offsets: tile index * tile extent.
// CHECK-NEXT:    %c4[[_:.*]] = arith.constant 4 : index
// CHECK-NEXT:    %[[R0:.+]] = arith.muli %[[I]], %c4{{.*}} : index
// CHECK-NEXT:    %c8[[_:.*]] = arith.constant 8 : index
// CHECK-NEXT:    %[[C0:.+]] = arith.muli %[[I]], %c8{{.*}} : index
// Load, step 1: fill the tile with the padding, in f32 rounded to bf16.
// CHECK:         scf.for %[[P0:.+]] = %{{.+}} to %c4{{.*}} step %{{.+}} {
// CHECK-NEXT:      scf.for %[[P1:.+]] = %{{.+}} to %c8{{.*}} step %{{.+}} {
// CHECK-NEXT:        %[[PAD:.+]] = arith.constant 2.500000e+00 : f32
// CHECK-NEXT:        %[[PADH:.+]] = arith.truncf %[[PAD]] : f32 to bf16
// CHECK-NEXT:        memref.store %[[PADH]], %[[XT]][%[[P0]], %[[P1]]] : memref<4x8xbf16>
// Load, step 2: the in-bounds extent per dim is min(max(dim - offset, 0), tile extent).
// CHECK:         %[[D0:.+]] = memref.dim %[[X]], %c0{{.*}}
// CHECK-NEXT:    %[[L0:.+]] = arith.subi %[[D0]], %[[R0]] : index
// CHECK-NEXT:    %c0[[_:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[N0:.+]] = arith.maxsi %[[L0]], %c0{{.*}} : index
// CHECK-NEXT:    %c4[[_:.*]] = arith.constant 4 : index
// CHECK-NEXT:    %[[E0:.+]] = arith.minsi %[[N0]], %c4{{.*}} : index
// CHECK-NEXT:    %c1[[_:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %[[D1:.+]] = memref.dim %[[X]], %c1{{.*}}
// CHECK-NEXT:    %[[L1:.+]] = arith.subi %[[D1]], %[[C0]] : index
// CHECK-NEXT:    %c0[[_:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[N1:.+]] = arith.maxsi %[[L1]], %c0{{.*}} : index
// CHECK-NEXT:    %c8[[_:.*]] = arith.constant 8 : index
// CHECK-NEXT:    %[[E1:.+]] = arith.minsi %[[N1]], %c8{{.*}} : index
// CHECK:         scf.for %[[A:.+]] = %{{.+}} to %[[E0]] step %{{.+}} {
// CHECK-NEXT:      scf.for %[[B:.+]] = %{{.+}} to %[[E1]] step %{{.+}} {
// CHECK-NEXT:        %[[GR:.+]] = arith.addi %[[R0]], %[[A]] : index
// CHECK-NEXT:        %[[GC:.+]] = arith.addi %[[C0]], %[[B]] : index
// CHECK-NEXT:        %[[V:.+]] = memref.load %[[X]][%[[GR]], %[[GC]]] : memref<?x?xbf16, strided<[?, ?], offset: ?>>
// CHECK-NEXT:        memref.store %[[V]], %[[XT]][%[[A]], %[[B]]] : memref<4x8xbf16>
// relu -> tile.full 0 ...
// CHECK:         scf.for
// CHECK-NEXT:      scf.for
// CHECK-NEXT:        %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        %[[ZEROH:.+]] = arith.truncf %[[ZERO]] : f32 to bf16
// CHECK-NEXT:        memref.store %[[ZEROH]], %[[ZT]]
// ... and tile.max, widened to f32 and rounded back once.
// CHECK:         scf.for %[[E:.+]] = %{{.+}} to %c4{{.*}} step
// CHECK-NEXT:      scf.for %[[F:.+]] = %{{.+}} to %c8{{.*}} step
// CHECK-NEXT:        %[[LX:.+]] = memref.load %[[XT]][%[[E]], %[[F]]] : memref<4x8xbf16>
// CHECK-NEXT:        %[[WX:.+]] = arith.extf %[[LX]] : bf16 to f32
// CHECK-NEXT:        %[[LZ:.+]] = memref.load %[[ZT]][%[[E]], %[[F]]] : memref<4x8xbf16>
// CHECK-NEXT:        %[[WZ:.+]] = arith.extf %[[LZ]] : bf16 to f32
// CHECK-NEXT:        %[[MX:.+]] = arith.maximumf %[[WX]], %[[WZ]] : f32
// CHECK-NEXT:        %[[MH:.+]] = arith.truncf %[[MX]] : f32 to bf16
// CHECK-NEXT:        memref.store %[[MH]], %[[RT]][%[[E]], %[[F]]] : memref<4x8xbf16>
// The store writes only the in-bounds part of Y.
// CHECK:         memref.dim %[[Y]], %c0
// CHECK:         arith.maxsi
// CHECK:         %[[SE0:.+]] = arith.minsi
// CHECK:         memref.dim %[[Y]], %c1
// CHECK:         arith.maxsi
// CHECK:         %[[SE1:.+]] = arith.minsi
// CHECK:         scf.for %[[G:.+]] = %{{.+}} to %[[SE0]] step
// CHECK-NEXT:      scf.for %[[H:.+]] = %{{.+}} to %[[SE1]] step
// CHECK-NEXT:        %[[SR:.+]] = arith.addi %{{.+}}, %[[G]] : index
// CHECK-NEXT:        %[[SC:.+]] = arith.addi %{{.+}}, %[[H]] : index
// CHECK-NEXT:        %[[SV:.+]] = memref.load %[[RT]][%[[G]], %[[H]]] : memref<4x8xbf16>
// CHECK-NEXT:        memref.store %[[SV]], %[[Y]][%[[SR]], %[[SC]]] : memref<?x?xbf16, strided<[?, ?], offset: ?>>
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:  }
// Buffers are freed after the grid, right before the return.
// CHECK-NEXT:  memref.dealloc %[[XT]] : memref<4x8xbf16>
// CHECK-NEXT:  memref.dealloc %[[ZT]] : memref<4x8xbf16>
// CHECK-NEXT:  memref.dealloc %[[RT]] : memref<4x8xbf16>
// CHECK-NEXT:  return
// CHECK-NEXT: }
tile.kernel @relu_bf16(in %X : !tile.tensor<[M, 8], bf16>, out %Y : !tile.tensor<[M, 8], bf16>) {
  %m = tile.dim "M"
  %c4 = arith.constant 4 : index
  %gm = arith.ceildivsi %m, %c4 : index
  tile.grid (%i) in (%gm) {
    %vx = tile.view %X[%i, %i] : !tile.tensor<[M, 8], bf16> -> !tile.view<4x8xbf16>
    %x = tile.load %vx {padding = 2.5 : f64} : !tile.view<4x8xbf16> -> !tile.tile<4x8xbf16>
    %r = tile.relu %x : !tile.tile<4x8xbf16>
    %vy = tile.view %Y[%i, %i] : !tile.tensor<[M, 8], bf16> -> !tile.view<4x8xbf16>
    tile.store %r, %vy : !tile.tile<4x8xbf16>, !tile.view<4x8xbf16>
  }
}

// A GEMM: a 2-d grid, a tile.loop over K carrying the f32 accumulator, bf16 operands.
// CHECK-LABEL: func.func @gemm(
// CHECK-SAME:    %[[A:[^:]+]]: memref<?x?xbf16, strided<[?, ?], offset: ?>>,
// CHECK-SAME:    %[[B:[^:]+]]: memref<?x?xbf16, strided<[?, ?], offset: ?>>,
// CHECK-SAME:    %[[C:[^:]+]]: memref<?x?xf32, strided<[?, ?], offset: ?>>) {
// CHECK-NEXT:  %[[ZERO:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4x8xf32>
// CHECK-NEXT:  %[[ACC:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4x8xf32>
// CHECK-NEXT:  %[[AT:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4x2xbf16>
// CHECK-NEXT:  %[[BT:.+]] = memref.alloc() {alignment = 64 : i64} : memref<2x8xbf16>
// CHECK-NEXT:  %[[DOT:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4x8xf32>
// CHECK-NOT:   memref.alloc
// CHECK-DAG:   %[[M:.+]] = memref.dim %[[A]], %c0
// CHECK-DAG:   %[[N:.+]] = memref.dim %[[B]], %c1
// CHECK-DAG:   %[[K:.+]] = memref.dim %[[A]], %c1
// CHECK:       scf.for %[[I:.+]] = %{{.+}} to %[[M]] step
// CHECK-NEXT:    scf.for %[[J:.+]] = %{{.+}} to %[[N]] step
// tile.full 0 for the initial accumulator (f32: no rounding).
// CHECK:             %[[Z:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        memref.store %[[Z]], %[[ZERO]]
// The carried value gets its own buffer, initialised by a copy.
// CHECK:             %[[INIT:.+]] = memref.load %[[ZERO]][%[[IA:.+]], %[[IB:.+]]] : memref<4x8xf32>
// CHECK-NEXT:        memref.store %[[INIT]], %[[ACC]][%[[IA]], %[[IB]]] : memref<4x8xf32>
// CHECK:         scf.for %[[KK:.+]] = %{{.+}} to %[[K]] step
// CHECK:               memref.load %[[A]]
// CHECK-NEXT:          memref.store %{{.+}}, %[[AT]]
// CHECK:               memref.load %[[B]]
// CHECK-NEXT:          memref.store %{{.+}}, %[[BT]]
// tile.dot: copy the accumulator into the result buffer, then per row of C a vector
// carried through the k loop: one FMA per k with a[i][k] broadcast and row k of B.
// CHECK:               %[[OLD:.+]] = memref.load %[[ACC]][%[[CA:.+]], %[[CB:.+]]] : memref<4x8xf32>
// CHECK-NEXT:          memref.store %[[OLD]], %[[DOT]][%[[CA]], %[[CB]]] : memref<4x8xf32>
// CHECK:           scf.for %[[DI:.+]] = %{{.+}} to %c4{{.*}} step
// CHECK-NEXT:        %[[ROW:.+]] = vector.load %[[DOT]][%[[DI]], %[[Z0:.+]]] : memref<4x8xf32>, vector<8xf32>
// CHECK:             %[[RES:.+]] = scf.for %[[DK:.+]] = %{{.+}} to %c2{{.*}} step %{{.+}} iter_args(%[[CARRY:.+]] = %[[ROW]]) -> (vector<8xf32>)
// CHECK-NEXT:          %[[AV:.+]] = memref.load %[[AT]][%[[DI]], %[[DK]]] : memref<4x2xbf16>
// CHECK-NEXT:          %[[AW:.+]] = arith.extf %[[AV]] : bf16 to f32
// CHECK-NEXT:          %[[BV:.+]] = vector.load %[[BT]][%[[DK]], %[[Z0]]] : memref<2x8xbf16>, vector<8xbf16>
// CHECK-NEXT:          %[[BW:.+]] = arith.extf %[[BV]] : vector<8xbf16> to vector<8xf32>
// CHECK-NEXT:          %[[SPLAT:.+]] = vector.broadcast %[[AW]] : f32 to vector<8xf32>
// CHECK-NEXT:          %[[FMA:.+]] = vector.fma %[[SPLAT]], %[[BW]], %[[CARRY]] : vector<8xf32>
// CHECK-NEXT:          scf.yield %[[FMA]] : vector<8xf32>
// CHECK-NEXT:        }
// CHECK-NEXT:        vector.store %[[RES]], %[[DOT]][%[[DI]], %[[Z0]]] : memref<4x8xf32>, vector<8xf32>
// The yield copies the dot's result into the carried buffer, inside the K loop.
// CHECK:               %[[NEXT:.+]] = memref.load %[[DOT]][%[[YA:.+]], %[[YB:.+]]] : memref<4x8xf32>
// CHECK-NEXT:          memref.store %[[NEXT]], %[[ACC]][%[[YA]], %[[YB]]] : memref<4x8xf32>
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// The loop's result is the carried buffer: that is what gets stored to C.
// CHECK:             %[[OUT:.+]] = memref.load %[[ACC]]
// CHECK-NEXT:        memref.store %[[OUT]], %[[C]]
// CHECK:       memref.dealloc %[[ZERO]]
// CHECK-NEXT:  memref.dealloc %[[ACC]]
// CHECK-NEXT:  memref.dealloc %[[AT]]
// CHECK-NEXT:  memref.dealloc %[[BT]]
// CHECK-NEXT:  memref.dealloc %[[DOT]]
// CHECK-NEXT:  return
tile.kernel @gemm(in %A : !tile.tensor<[M, K], bf16>, in %B : !tile.tensor<[K, N], bf16>,
                  out %C : !tile.tensor<[M, N], f32>) {
  %M = tile.dim "M"
  %N = tile.dim "N"
  %K = tile.dim "K"
  tile.grid (%i, %j) in (%M, %N) {
    %z = tile.full 0.0 : !tile.tile<4x8xf32>
    %acc = tile.loop %kk to %K stages 3 carry(%c = %z : !tile.tile<4x8xf32>) {
      %va = tile.view %A[%i, %kk] : !tile.tensor<[M, K], bf16> -> !tile.view<4x2xbf16>
      %vb = tile.view %B[%kk, %j] : !tile.tensor<[K, N], bf16> -> !tile.view<2x8xbf16>
      %a = tile.load %va : !tile.view<4x2xbf16> -> !tile.tile<4x2xbf16>
      %b = tile.load %vb : !tile.view<2x8xbf16> -> !tile.tile<2x8xbf16>
      %d = tile.dot %a, %b, %c : !tile.tile<4x2xbf16>, !tile.tile<2x8xbf16> -> !tile.tile<4x8xf32>
      tile.yield %d : !tile.tile<4x8xf32>
    }
    %vc = tile.view %C[%i, %j] : !tile.tensor<[M, N], f32> -> !tile.view<4x8xf32>
    tile.store %acc, %vc : !tile.tile<4x8xf32>, !tile.view<4x8xf32>
  }
}

// Reductions accumulate in an f32 buffer: reduce_max starts from -inf (0xFF800000),
// reduce_sum from 0; a bf16 result is rounded once, after the reduction. Also a
// broadcast and an index splat.
// CHECK-LABEL: func.func @reductions(
// CHECK-SAME:    %[[X:[^:]+]]: memref<?x?xf32, strided<[?, ?], offset: ?>>,
// CHECK-SAME:    %[[H:[^:]+]]: memref<?x?xbf16, strided<[?, ?], offset: ?>>,
// CHECK-SAME:    %[[Y:[^:]+]]: memref<?x?xf32, strided<[?, ?], offset: ?>>,
// CHECK-SAME:    %[[S:[^:]+]]: memref<?xbf16, strided<[?], offset: ?>>) {
// CHECK-NEXT:  %[[XT:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4x8xf32>
// CHECK-NEXT:  %[[MAX:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
// CHECK-NEXT:  %[[BC:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4x8xf32>
// CHECK-NEXT:  %[[SP:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4x8xf32>
// CHECK-NEXT:  %[[ADD:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4x8xf32>
// CHECK-NEXT:  %[[HT:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4x8xbf16>
// CHECK-NEXT:  %[[ACC:.+]] = memref.alloc() {alignment = 64 : i64} : memref<8xf32>
// CHECK-NEXT:  %[[SUM:.+]] = memref.alloc() {alignment = 64 : i64} : memref<8xbf16>
// CHECK-NOT:   memref.alloc
// CHECK:       %[[M:.+]] = memref.dim %[[X]], %c0
// reduce_max over dim 1 of an f32 tile: fill with -inf, then max-accumulate into [row].
// CHECK:             %[[NINF:.+]] = arith.constant 0xFF800000 : f32
// CHECK-NEXT:        memref.store %[[NINF]], %[[MAX]][%{{.+}}] : memref<4xf32>
// CHECK:           scf.for %[[RI:.+]] = %{{.+}} to %c4{{.*}} step
// CHECK-NEXT:        scf.for %[[RJ:.+]] = %{{.+}} to %c8{{.*}} step
// CHECK-NEXT:          %[[XV:.+]] = memref.load %[[XT]][%[[RI]], %[[RJ]]] : memref<4x8xf32>
// CHECK-NEXT:          %[[MV:.+]] = memref.load %[[MAX]][%[[RI]]] : memref<4xf32>
// CHECK-NEXT:          %[[MM:.+]] = arith.maximumf %[[MV]], %[[XV]] : f32
// CHECK-NEXT:          memref.store %[[MM]], %[[MAX]][%[[RI]]] : memref<4xf32>
// broadcast [0]: result[i, j] = input[i].
// CHECK:           scf.for %[[BI:.+]] = %{{.+}} to %c4{{.*}} step
// CHECK-NEXT:        scf.for %[[BJ:.+]] = %{{.+}} to %c8{{.*}} step
// CHECK-NEXT:          %[[BV:.+]] = memref.load %[[MAX]][%[[BI]]] : memref<4xf32>
// CHECK-NEXT:          memref.store %[[BV]], %[[BC]][%[[BI]], %[[BJ]]] : memref<4x8xf32>
// splat of an index: index -> i64 -> f32, computed once, then filled.
// CHECK:           %[[I64:.+]] = arith.index_cast %[[M]] : index to i64
// CHECK-NEXT:      %[[F:.+]] = arith.sitofp %[[I64]] : i64 to f32
// CHECK:               memref.store %[[F]], %[[SP]]
// The bf16 load pads with 0 ...
// CHECK:               %[[PZ:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:          %[[PH:.+]] = arith.truncf %[[PZ]] : f32 to bf16
// CHECK-NEXT:          memref.store %[[PH]], %[[HT]][%{{.+}}, %{{.+}}] : memref<4x8xbf16>
// ... reduce_sum over dim 0 of that bf16 tile: an f32 accumulator starting at 0 ...
// CHECK:             %[[ZS:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        memref.store %[[ZS]], %[[ACC]][%{{.+}}] : memref<8xf32>
// CHECK:           scf.for %[[SI:.+]] = %{{.+}} to %c4{{.*}} step
// CHECK-NEXT:        scf.for %[[SJ:.+]] = %{{.+}} to %c8{{.*}} step
// CHECK-NEXT:          %[[HV:.+]] = memref.load %[[HT]][%[[SI]], %[[SJ]]] : memref<4x8xbf16>
// CHECK-NEXT:          %[[HW:.+]] = arith.extf %[[HV]] : bf16 to f32
// CHECK-NEXT:          %[[SV:.+]] = memref.load %[[ACC]][%[[SJ]]] : memref<8xf32>
// CHECK-NEXT:          %[[SS:.+]] = arith.addf %[[SV]], %[[HW]] : f32
// CHECK-NEXT:          memref.store %[[SS]], %[[ACC]][%[[SJ]]] : memref<8xf32>
// ... rounded to bf16 once at the end.
// CHECK:           scf.for %[[RQ:.+]] = %{{.+}} to %c8{{.*}} step
// CHECK-NEXT:        %[[AV:.+]] = memref.load %[[ACC]][%[[RQ]]] : memref<8xf32>
// CHECK-NEXT:        %[[AH:.+]] = arith.truncf %[[AV]] : f32 to bf16
// CHECK-NEXT:        memref.store %[[AH]], %[[SUM]][%[[RQ]]] : memref<8xbf16>
// CHECK:       memref.dealloc %[[XT]]
// CHECK:       memref.dealloc %[[SUM]]
// CHECK-NEXT:  return
tile.kernel @reductions(in %X : !tile.tensor<[M, 8], f32>, in %H : !tile.tensor<[M, 8], bf16>,
                        out %Y : !tile.tensor<[M, 8], f32>, out %S : !tile.tensor<[8], bf16>) {
  %m = tile.dim "M"
  tile.grid (%i) in (%m) {
    %vx = tile.view %X[%i, %i] : !tile.tensor<[M, 8], f32> -> !tile.view<4x8xf32>
    %x = tile.load %vx : !tile.view<4x8xf32> -> !tile.tile<4x8xf32>
    %mx = tile.reduce_max %x dim 1 : !tile.tile<4x8xf32> -> !tile.tile<4xf32>
    %b = tile.broadcast %mx [0] : !tile.tile<4xf32> -> !tile.tile<4x8xf32>
    %n = tile.splat %m : index -> !tile.tile<4x8xf32>
    %y = tile.add %b, %n : !tile.tile<4x8xf32>
    %vy = tile.view %Y[%i, %i] : !tile.tensor<[M, 8], f32> -> !tile.view<4x8xf32>
    tile.store %y, %vy : !tile.tile<4x8xf32>, !tile.view<4x8xf32>
    %vh = tile.view %H[%i, %i] : !tile.tensor<[M, 8], bf16> -> !tile.view<4x8xbf16>
    %h = tile.load %vh : !tile.view<4x8xbf16> -> !tile.tile<4x8xbf16>
    %s = tile.reduce_sum %h dim 0 : !tile.tile<4x8xbf16> -> !tile.tile<8xbf16>
    %vs = tile.view %S[%i] : !tile.tensor<[8], bf16> -> !tile.view<8xbf16>
    tile.store %s, %vs : !tile.tile<8xbf16>, !tile.view<8xbf16>
  }
}

// Loop-carried values that swap: each yielded carried buffer is staged through a temp
// before any carried buffer is overwritten, so value semantics hold.
// CHECK-LABEL: func.func @swap(
// CHECK-NEXT:  %[[XT:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
// CHECK-NEXT:  %[[ONE:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
// CHECK-NEXT:  %[[P:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
// CHECK-NEXT:  %[[Q:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
// CHECK-NEXT:  %[[T0:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
// CHECK-NEXT:  %[[T1:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
// CHECK-NEXT:  %[[D:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
// CHECK-NOT:   memref.alloc
// CHECK:       %[[N:.+]] = memref.dim %{{.+}}, %c0
// CHECK:       scf.for %{{.+}} = %{{.+}} to %[[N]] step
// Carried buffers are initialised from the inits...
// CHECK:           %[[V0:.+]] = memref.load %[[XT]]
// CHECK-NEXT:      memref.store %[[V0]], %[[P]]
// CHECK:           %[[V1:.+]] = memref.load %[[ONE]]
// CHECK-NEXT:      memref.store %[[V1]], %[[Q]]
// ... and in the loop body q -> t0, p -> t1, then t0 -> p, t1 -> q.
// CHECK:         scf.for %{{.+}} = %{{.+}} to %[[N]] step
// CHECK:             %[[W0:.+]] = memref.load %[[Q]]
// CHECK-NEXT:        memref.store %[[W0]], %[[T0]]
// CHECK:             %[[W1:.+]] = memref.load %[[P]]
// CHECK-NEXT:        memref.store %[[W1]], %[[T1]]
// CHECK:             %[[W2:.+]] = memref.load %[[T0]]
// CHECK-NEXT:        memref.store %[[W2]], %[[P]]
// CHECK:             %[[W3:.+]] = memref.load %[[T1]]
// CHECK-NEXT:        memref.store %[[W3]], %[[Q]]
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// The loop's results are the carried buffers.
// CHECK:           %[[R0:.+]] = memref.load %[[P]]
// CHECK-NEXT:      %[[R1:.+]] = memref.load %[[Q]]
// CHECK-NEXT:      %[[DIFF:.+]] = arith.subf %[[R0]], %[[R1]] : f32
// CHECK-NEXT:      memref.store %[[DIFF]], %[[D]]
tile.kernel @swap(in %X : !tile.tensor<[N], f32>, out %Y : !tile.tensor<[N], f32>) {
  %n = tile.dim "N"
  tile.grid (%i) in (%n) {
    %vx = tile.view %X[%i] : !tile.tensor<[N], f32> -> !tile.view<4xf32>
    %x = tile.load %vx : !tile.view<4xf32> -> !tile.tile<4xf32>
    %one = tile.full 1.0 : !tile.tile<4xf32>
    %r:2 = tile.loop %k to %n carry(%p = %x : !tile.tile<4xf32>, %q = %one : !tile.tile<4xf32>) {
      tile.yield %q, %p : !tile.tile<4xf32>, !tile.tile<4xf32>
    }
    %d = tile.sub %r#0, %r#1 : !tile.tile<4xf32>
    %vy = tile.view %Y[%i] : !tile.tensor<[N], f32> -> !tile.view<4xf32>
    tile.store %d, %vy : !tile.tile<4xf32>, !tile.view<4xf32>
  }
}

// The other composites and elementwise ops, f16 in and out: each is widened with extf,
// computed in f32 (math dialect for transcendentals), rounded back with truncf.
// CHECK-LABEL: func.func @elementwise_f16(
// CHECK-NOT:   math.absf
// CHECK:       math.exp
// CHECK:       math.exp2
// CHECK:       math.log
// CHECK:       math.sqrt
// rsqrt is 1 / sqrt(x).
// CHECK:       %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:  %[[SQ:.+]] = math.sqrt %{{.+}} : f32
// CHECK-NEXT:  %[[RS:.+]] = arith.divf %[[ONE]], %[[SQ]] : f32
// CHECK-NEXT:  arith.truncf %[[RS]] : f32 to f16
// CHECK:       math.tanh
// scale is a multiply by an f32 constant.
// CHECK:       %[[W:.+]] = arith.extf %{{.+}} : f16 to f32
// CHECK-NEXT:  %[[FAC:.+]] = arith.constant 3.000000e+00 : f32
// CHECK-NEXT:  %[[SC:.+]] = arith.mulf %[[W]], %[[FAC]] : f32
// CHECK-NEXT:  arith.truncf %[[SC]] : f32 to f16
// CHECK:       arith.negf
// CHECK:       arith.subf
// CHECK:       arith.minimumf
// gelu's tanh, silu's sigmoid exp.
// CHECK:       math.tanh
// CHECK:       math.exp
// CHECK:       return
tile.kernel @elementwise_f16(in %X : !tile.tensor<[N], f16>, out %Y : !tile.tensor<[N], f16>) {
  %n = tile.dim "N"
  tile.grid (%i) in (%n) {
    %vx = tile.view %X[%i] : !tile.tensor<[N], f16> -> !tile.view<8xf16>
    %x = tile.load %vx : !tile.view<8xf16> -> !tile.tile<8xf16>
    %a = tile.exp %x : !tile.tile<8xf16>
    %b = tile.exp2 %a : !tile.tile<8xf16>
    %c = tile.log %b : !tile.tile<8xf16>
    %d = tile.sqrt %c : !tile.tile<8xf16>
    %e = tile.rsqrt %d : !tile.tile<8xf16>
    %f = tile.tanh %e : !tile.tile<8xf16>
    %g = tile.scale %f, 3.0 : !tile.tile<8xf16>
    %h = tile.neg %g : !tile.tile<8xf16>
    %k = tile.sub %h, %x : !tile.tile<8xf16>
    %l = tile.min %k, %x : !tile.tile<8xf16>
    %m = tile.gelu %l : !tile.tile<8xf16>
    %o = tile.silu %m : !tile.tile<8xf16>
    %vy = tile.view %Y[%i] : !tile.tensor<[N], f16> -> !tile.view<8xf16>
    tile.store %o, %vy : !tile.tile<8xf16>, !tile.view<8xf16>
  }
}

// tile.cast f16 -> bf16: widen, then round once; f32 -> f32 needs neither.
// CHECK-LABEL: func.func @cast(
// CHECK-SAME:    %[[X:[^:]+]]: memref<?xf16, strided<[?], offset: ?>>,
// CHECK-SAME:    %[[Y:[^:]+]]: memref<?xbf16, strided<[?], offset: ?>>) {
// CHECK-NEXT:  %[[XT:.+]] = memref.alloc() {alignment = 64 : i64} : memref<8xf16>
// CHECK-NEXT:  %[[YT:.+]] = memref.alloc() {alignment = 64 : i64} : memref<8xbf16>
// CHECK-NOT:   memref.alloc
// CHECK:             %[[CH:.+]] = memref.load %[[XT]][%[[CI:.+]]] : memref<8xf16>
// CHECK-NEXT:        %[[CW:.+]] = arith.extf %[[CH]] : f16 to f32
// CHECK-NEXT:        %[[CB:.+]] = arith.truncf %[[CW]] : f32 to bf16
// CHECK-NEXT:        memref.store %[[CB]], %[[YT]][%[[CI]]] : memref<8xbf16>
tile.kernel @cast(in %X : !tile.tensor<[N], f16>, out %Y : !tile.tensor<[N], bf16>) {
  %n = tile.dim "N"
  tile.grid (%i) in (%n) {
    %vx = tile.view %X[%i] : !tile.tensor<[N], f16> -> !tile.view<8xf16>
    %x = tile.load %vx : !tile.view<8xf16> -> !tile.tile<8xf16>
    %y = tile.cast %x : !tile.tile<8xf16> -> !tile.tile<8xbf16>
    %vy = tile.view %Y[%i] : !tile.tensor<[N], bf16> -> !tile.view<8xbf16>
    tile.store %y, %vy : !tile.tile<8xbf16>, !tile.view<8xbf16>
  }
}

// A math function's loop nest is marked kiln.no_unroll (the CPU backend keeps LLVM from
// unrolling it: fully unrolled, such loops made compiles take seconds); a cast's is not.
// CHECK-LABEL: func.func @exp_then_cast(
// CHECK:             math.exp %{{.+}} : f32
// CHECK:           } {kiln.no_unroll}
// CHECK-NEXT:    } {kiln.no_unroll}
// CHECK:             arith.truncf %{{.+}} : f32 to bf16
// CHECK-NEXT:        memref.store
// CHECK-NEXT:      }{{$}}
// CHECK-NEXT:    }{{$}}
tile.kernel @exp_then_cast(in %X : !tile.tensor<[M, N], f32>, out %Y : !tile.tensor<[M, N], bf16>) {
  %m = tile.dim "M"
  %n = tile.dim "N"
  tile.grid (%i, %j) in (%m, %n) {
    %vx = tile.view %X[%i, %j] : !tile.tensor<[M, N], f32> -> !tile.view<4x8xf32>
    %x = tile.load %vx : !tile.view<4x8xf32> -> !tile.tile<4x8xf32>
    %e = tile.exp %x : !tile.tile<4x8xf32>
    %y = tile.cast %e : !tile.tile<4x8xf32> -> !tile.tile<4x8xbf16>
    %vy = tile.view %Y[%i, %j] : !tile.tensor<[M, N], bf16> -> !tile.view<4x8xbf16>
    tile.store %y, %vy : !tile.tile<4x8xbf16>, !tile.view<4x8xbf16>
  }
}

// A transpose reads its input with the indices swapped; an iota converts its index; a
// comparison is a cmpf turned into 1 or 0, a select a cmpf against 0.
// CHECK-LABEL: func.func @masks
// CHECK:         memref.load %{{.*}}[%[[J:.+]], %[[I:.+]]] : memref<4x8xf32>
// CHECK:         arith.index_cast %{{.*}} : index to i64
// CHECK-NEXT:    arith.sitofp %{{.*}} : i64 to f32
// CHECK:         arith.cmpf ole
// CHECK:         arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK:         arith.cmpf une
// CHECK:         arith.select
tile.kernel @masks(in %X : !tile.tensor<[N, N], f32>, out %Y : !tile.tensor<[N, N], f32>) {
  %n = tile.dim "N"
  tile.grid (%i, %j) in (%n, %n) {
    %vx = tile.view %X[%j, %i] : !tile.tensor<[N, N], f32> -> !tile.view<4x8xf32>
    %x = tile.load %vx : !tile.view<4x8xf32> -> !tile.tile<4x8xf32>
    %t = tile.transpose %x : !tile.tile<4x8xf32> -> !tile.tile<8x4xf32>
    %c = tile.iota dim 1 : !tile.tile<8x4xf32>
    %k = tile.cmp "le", %c, %t : !tile.tile<8x4xf32>
    %s = tile.select %k, %t, %c : !tile.tile<8x4xf32>
    %vy = tile.view %Y[%i, %j] : !tile.tensor<[N, N], f32> -> !tile.view<8x4xf32>
    tile.store %s, %vy : !tile.tile<8x4xf32>, !tile.view<8x4xf32>
  }
}

// A view that fixes a leading dim reads through the slice at that index: an offset moved by
// the index times its stride, the kept dims' sizes 0 when the index is past its dim.
// CHECK-LABEL: func.func @leading
// CHECK: memref.extract_strided_metadata
// CHECK: arith.cmpi ult
// CHECK: arith.select
// CHECK: memref.reinterpret_cast {{.*}} to memref<?x?xf32, strided<[?, ?], offset: ?>>
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

// A window narrows a kept dim of the slice: its start (0 where it lies past the dim or the
// size is not positive) times that dim's stride moves the offset, and the dim's size is the
// smaller of the window's size and the room left.
// CHECK-LABEL: func.func @window
// CHECK: memref.reinterpret_cast {{.*}} to memref<?x?xf32, strided<[?, ?], offset: ?>>
// CHECK: memref.extract_strided_metadata
// CHECK: arith.cmpi ult
// CHECK: arith.cmpi sgt
// CHECK: arith.andi
// CHECK: arith.minsi
// CHECK: arith.muli
// CHECK: memref.reinterpret_cast {{.*}} to memref<?x?xf32, strided<[?, ?], offset: ?>>
tile.kernel @window(in %X : !tile.tensor<[B, M, N], f32>, in %Off : !tile.tensor<[B], i32>,
                    out %Y : !tile.tensor<[B, M, N], f32>) {
  %b = tile.dim "B"
  tile.grid (%n) in (%b) {
    %c0 = arith.constant 0 : index
    %at = tile.read %Off[%n] : !tile.tensor<[B], i32>
    %v = tile.view %X[%n, %c0, %c0] window(%at, %at) along 1 : !tile.tensor<[B, M, N], f32> -> !tile.view<4x8xf32>
    %x = tile.load %v : !tile.view<4x8xf32> -> !tile.tile<4x8xf32>
    %w = tile.view %Y[%n, %c0, %c0] : !tile.tensor<[B, M, N], f32> -> !tile.view<4x8xf32>
    tile.store %x, %w : !tile.tile<4x8xf32>, !tile.view<4x8xf32>
  }
}

//--- errors.mlir

// kiln-lower-to-loops alone: composites must be expanded first.
tile.kernel @composite_left(in %X : !tile.tensor<[N], f32>, out %Y : !tile.tensor<[N], f32>) {
  %n = tile.dim "N"
  tile.grid (%i) in (%n) {
    %vx = tile.view %X[%i] : !tile.tensor<[N], f32> -> !tile.view<4xf32>
    %x = tile.load %vx : !tile.view<4xf32> -> !tile.tile<4xf32>
    // expected-error @+1 {{'tile.relu' op is a composite: run kiln-expand-composites before kiln-lower-to-loops}}
    %r = tile.relu %x : !tile.tile<4xf32>
    %vy = tile.view %Y[%i] : !tile.tensor<[N], f32> -> !tile.view<4xf32>
    tile.store %r, %vy : !tile.tile<4xf32>, !tile.view<4xf32>
  }
}

// -----

// A composite nested in a tile.loop is found too.
tile.kernel @composite_in_loop(in %X : !tile.tensor<[N], f32>, out %Y : !tile.tensor<[N], f32>) {
  %n = tile.dim "N"
  tile.grid (%i) in (%n) {
    %vx = tile.view %X[%i] : !tile.tensor<[N], f32> -> !tile.view<4xf32>
    %x = tile.load %vx : !tile.view<4xf32> -> !tile.tile<4xf32>
    %r = tile.loop %k to %n carry(%c = %x : !tile.tile<4xf32>) {
      // expected-error @+1 {{'tile.sigmoid' op is a composite}}
      %s = tile.sigmoid %c : !tile.tile<4xf32>
      tile.yield %s : !tile.tile<4xf32>
    }
    %vy = tile.view %Y[%i] : !tile.tensor<[N], f32> -> !tile.view<4xf32>
    tile.store %r, %vy : !tile.tile<4xf32>, !tile.view<4xf32>
  }
}

// -----

// gelu and silu are composites as well.
tile.kernel @gelu_left(in %X : !tile.tensor<[N], f32>, out %Y : !tile.tensor<[N], f32>) {
  %n = tile.dim "N"
  tile.grid (%i) in (%n) {
    %vx = tile.view %X[%i] : !tile.tensor<[N], f32> -> !tile.view<4xf32>
    %x = tile.load %vx : !tile.view<4xf32> -> !tile.tile<4xf32>
    // expected-error @+1 {{'tile.gelu' op is a composite}}
    %g = tile.gelu %x : !tile.tile<4xf32>
    %s = tile.silu %g : !tile.tile<4xf32>
    %vy = tile.view %Y[%i] : !tile.tensor<[N], f32> -> !tile.view<4xf32>
    tile.store %s, %vy : !tile.tile<4xf32>, !tile.view<4xf32>
  }
}

// -----

tile.kernel @silu_left(in %X : !tile.tensor<[N], f32>, out %Y : !tile.tensor<[N], f32>) {
  %n = tile.dim "N"
  tile.grid (%i) in (%n) {
    %vx = tile.view %X[%i] : !tile.tensor<[N], f32> -> !tile.view<4xf32>
    %x = tile.load %vx : !tile.view<4xf32> -> !tile.tile<4xf32>
    // expected-error @+1 {{'tile.silu' op is a composite}}
    %s = tile.silu %x : !tile.tile<4xf32>
    %vy = tile.view %Y[%i] : !tile.tensor<[N], f32> -> !tile.view<4xf32>
    tile.store %s, %vy : !tile.tile<4xf32>, !tile.view<4xf32>
  }
}

// -----

// Only tile ops and arith ops can be lowered inside a kernel.
tile.kernel @foreign_op(in %X : !tile.tensor<[N], f32>, out %Y : !tile.tensor<[N], f32>) {
  %n = tile.dim "N"
  %f = arith.constant -2.0 : f32
  // expected-error @+1 {{'math.absf' op cannot be lowered to CPU loops}}
  %a = math.absf %f : f32
  tile.grid (%i) in (%n) {
    %s = tile.splat %a : f32 -> !tile.tile<4xf32>
    %vy = tile.view %Y[%i] : !tile.tensor<[N], f32> -> !tile.view<4xf32>
    tile.store %s, %vy : !tile.tile<4xf32>, !tile.view<4xf32>
  }
}
