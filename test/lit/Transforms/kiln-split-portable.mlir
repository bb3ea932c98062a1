// kiln-split-portable: the portable kernel beside sm_90a twins moves to a gpu.module of its
// own, with copies of the globals it names; modules without both kinds stay as they are.
//
// RUN: kiln-opt %s --kiln-split-portable | FileCheck %s
// RUN: kiln-opt %s --kiln-split-portable="twin-modules=1" | FileCheck %s --check-prefix=TWINS

module attributes {gpu.container_module} {
  // The twin keeps the module, its name and its shared-memory global; the kernel goes.
  // CHECK-LABEL: gpu.module @kiln [#nvvm.target<chip = "sm_90a">] {
  // CHECK-NEXT:    llvm.mlir.global external @kiln_sm90_smem()
  // CHECK-NEXT:    llvm.mlir.global internal constant @table(
  // CHECK-NEXT:    gpu.func @k__sm90_attn() kernel attributes {kiln.launch_plan = "{}"} {
  // CHECK:         }
  // CHECK-NEXT:  }
  // The kernel, right after, under the same target, with a copy of the one global it names.
  // CHECK-NEXT:  gpu.module @kiln_portable [#nvvm.target<chip = "sm_90a">] {
  // CHECK-NEXT:    llvm.mlir.global internal constant @table(
  // CHECK-NEXT:    gpu.func @k(%{{.*}}: memref<?xf32>) kernel attributes {kiln.shared_bytes = 4096 : i64} {
  // CHECK:           llvm.mlir.addressof @table
  // CHECK:         }
  // CHECK-NEXT:  }
  gpu.module @kiln [#nvvm.target<chip = "sm_90a">] {
    llvm.mlir.global external @kiln_sm90_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
    llvm.mlir.global internal constant @table(dense<1.0> : tensor<4xf32>) : !llvm.array<4 x f32>
    gpu.func @k__sm90_attn() kernel attributes {kiln.launch_plan = "{}"} {
      %p = llvm.mlir.addressof @kiln_sm90_smem : !llvm.ptr<3>
      gpu.return
    }
    gpu.func @k(%arg0: memref<?xf32>) kernel attributes {kiln.shared_bytes = 4096 : i64} {
      %t = llvm.mlir.addressof @table : !llvm.ptr
      gpu.return
    }
  }

  // No twin: nothing moves.
  // CHECK-LABEL: gpu.module @plain {
  // CHECK-NEXT:    gpu.func @only() kernel {
  // CHECK-NOT:   gpu.module @plain_portable
  gpu.module @plain {
    gpu.func @only() kernel {
      gpu.return
    }
  }

  // Twins alone (a kernel the twin always takes): nothing moves.
  // CHECK-LABEL: gpu.module @twins {
  // CHECK-NEXT:    gpu.func @t__sm90() kernel attributes {kiln.launch_plan = "{}"} {
  // CHECK-NOT:   gpu.module @twins_portable
  gpu.module @twins {
    gpu.func @t__sm90() kernel attributes {kiln.launch_plan = "{}"} {
      gpu.return
    }
  }

  // Several twins (a GEMM's tile shapes): they stay together by default; with twin-modules
  // each past the first gets a module of its own, in order, and the kernel's comes last.
  // CHECK-LABEL: gpu.module @gemm {
  // CHECK-NEXT:    gpu.func @g__sm90_128x128() kernel
  // CHECK:         gpu.func @g__sm90_128x256() kernel
  // CHECK:       gpu.module @gemm_portable {
  // CHECK-NEXT:    gpu.func @g() kernel
  // TWINS-LABEL: gpu.module @gemm {
  // TWINS-NEXT:    gpu.func @g__sm90_128x128() kernel
  // TWINS:       gpu.module @gemm_twin1 {
  // TWINS-NEXT:    gpu.func @g__sm90_128x256() kernel
  // TWINS:       gpu.module @gemm_twin2 {
  // TWINS-NEXT:    gpu.func @g__sm90_dec() kernel
  // TWINS:       gpu.module @gemm_portable {
  // TWINS-NEXT:    gpu.func @g() kernel
  gpu.module @gemm {
    gpu.func @g__sm90_128x128() kernel attributes {kiln.launch_plan = "{}"} {
      gpu.return
    }
    gpu.func @g__sm90_128x256() kernel attributes {kiln.launch_plan = "{}"} {
      gpu.return
    }
    gpu.func @g() kernel {
      gpu.return
    }
    gpu.func @g__sm90_dec() kernel attributes {kiln.launch_plan = "{}"} {
      gpu.return
    }
  }
}
