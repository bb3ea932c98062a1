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

#endif // KILN_PASSES
