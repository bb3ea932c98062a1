#ifndef KILN_PASSES
#define KILN_PASSES

include "mlir/Pass/PassBase.td"

// Every kiln pass flag starts with `kiln-`.

def KilnExpandComposites : Pass<"kiln-expand-composites", "::kiln::tile::KernelOp"> {
  let summary = "rewrite composite tile ops (relu, gelu, silu, sigmoid) into primitives";
  let description = [{
    Backends then lower only primitive ops: relu -> max(x, 0); gelu (tanh form) ->
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); silu -> x * sigmoid(x);
    sigmoid -> 1 / (1 + exp(-x)). The math runs in the tile's element type, so a backend
    that computes bf16 elementwise ops in f32 still rounds only once per primitive.
  }];
}

def KilnLowerToLoops : Pass<"kiln-lower-to-loops", "::mlir::ModuleOp"> {
  let summary = "CPU backend: lower tile kernels to func/scf/memref/arith/math loops";
  let description = [{
    Each `tile.kernel` becomes a `func.func` taking one strided memref per tensor
    (dims and strides are runtime values). `tile.grid` becomes a loop nest; every tile
    value gets a buffer allocated once at function entry; loads fill padding then copy the
    in-bounds part, stores write only the in-bounds part. Elementwise math runs in f32.
    Loop-carried tiles get their own buffers, so value semantics hold across iterations.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect", "::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect", "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

def KilnLowerToGPU : Pass<"kiln-lower-to-gpu", "::mlir::ModuleOp"> {
  let summary = "CUDA backend: lower tile kernels to gpu.func kernels (SIMT, blocked layout)";
  let description = [{
    Each `tile.kernel` becomes a `gpu.func` kernel in `gpu.module @kiln`, one CTA per
    `tile.grid` index (blockIdx.x/y/z) and `num-warps` warps per CTA. A tile value is
    distributed over the CTA's threads in a blocked layout: thread t holds elements
    t, t+T, t+2T, ... of the row-major tile, as SSA values (registers). Loads and stores
    go straight between registers and global memory, coalesced and masked at ragged edges.
    Ops that need other threads' elements (dot, broadcast, reductions) exchange them
    through one dynamic shared-memory scratch buffer, fenced by barriers; the pass records
    its size in `kiln.shared_bytes` on the gpu.func. Math uses polynomial approximations
    (no libdevice). This is the portable sm_80+ baseline; tensor-core MMA, cp.async
    pipelining and TMA come as layouts and passes on top of it.
  }];
  let options = [
    Option<"numWarps", "num-warps", "int64_t", /*default=*/"4", "warps per CTA">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect", "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect", "::mlir::LLVM::LLVMDialect"];
}

#endif // KILN_PASSES
