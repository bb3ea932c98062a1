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
                           "::mlir::math::MathDialect", "::mlir::vector::VectorDialect"];
}

def KilnAssignLayouts : Pass<"kiln-assign-layouts", "::mlir::ModuleOp"> {
  let summary = "CUDA: decide how tiles are spread over threads, and record it in the IR";
  let description = [{
    Sets `tile.layout` on every `tile.dot`: `#tile.mma<warps = [wm, wn], frags = [tm, tn]>`
    when it runs on the tensor cores (bf16/f16 operands, M, N, K multiples of 16, 8, 16;
    the warp grid closest to square warp tiles), else `#tile.blocked`; and
    `tile.carried_layouts` on every `tile.loop`: per carried tile, the mma layout of the
    tensor-core dot its yielded value comes from through elementwise ops, else
    `#tile.blocked`. kiln-lower-to-gpu follows these (and makes the same decisions itself
    when they are absent).
  }];
  let options = [
    Option<"numWarps", "num-warps", "int64_t", /*default=*/"4", "warps per CTA">,
  ];
}

def KilnLowerToGPU : Pass<"kiln-lower-to-gpu", "::mlir::ModuleOp"> {
  let summary = "CUDA backend: lower tile kernels to gpu.func kernels (registers, tensor cores, cp.async)";
  let description = [{
    Each `tile.kernel` becomes a `gpu.func` kernel in `gpu.module @kiln`, one CTA per
    `tile.grid` index (blockIdx.x/y/z) and `num-warps` warps per CTA. A tile value is
    distributed over the CTA's threads as SSA values (registers): in a blocked layout
    (thread t holds elements t, t+T, ...; loads and stores coalesce, masked at ragged
    edges), or in the mma accumulator layout when it comes from a tensor-core dot
    (bf16/f16 operands, mma.sync.m16n8k16, f32 accumulate). Dot operands loaded only for
    the dot go global -> shared directly with 16-byte cp.async copies (zero-filled past the
    edge) when the rows are aligned, element by element otherwise. Other exchanges
    (broadcast, reductions, layout changes) go through one dynamic shared-memory scratch
    buffer between barriers; the pass records its size in `kiln.shared_bytes`. Math uses
    polynomial approximations (no libdevice). Not yet: multi-stage pipelining (`stages`
    is accepted and ignored), ldmatrix, wgmma/TMA.
  }];
  let options = [
    Option<"numWarps", "num-warps", "int64_t", /*default=*/"4", "warps per CTA">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect", "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect", "::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect", "::mlir::nvgpu::NVGPUDialect",
                           "::mlir::vector::VectorDialect"];
}

def KilnLowerGemmSm90 : Pass<"kiln-lower-gemm-sm90", "::mlir::ModuleOp"> {
  let summary = "CUDA sm_90a: a GEMM-shaped tile kernel also gets a TMA + wgmma, warp-specialised kernel";
  let description = [{
    A `tile.kernel` that is one GEMM (a k-loop of `tile.dot` on loads of A at (i, k) and
    B at (k, j), bf16 or f16) followed by an elementwise epilogue stored to C at (i, j)
    gets a second kernel `<name>__sm90` in `gpu.module @kiln`: 384 threads, a producer
    warpgroup issuing TMA loads into a ring of `stages` 128B-swizzled shared-memory stages
    guarded by mbarriers, one or two consumer warpgroups running `wgmma.mma_async` m64n`tile-n`k16
    with f32 accumulators in registers, and the kernel's own epilogue evaluated on the
    accumulator fragments. The tile kernel itself is left for kiln-lower-to-gpu (the
    portable kernel the runtime falls back to). The kernel's launch plan (parameters:
    tensor maps, pointers, strides, dims; grid; threads; shared memory) is the JSON string
    attribute `kiln.launch_plan`. For a kernel that is not matched, the module gets a
    `kiln.sm90` string attribute saying why.
  }];
  let options = [
    Option<"tileN", "tile-n", "int64_t", /*default=*/"0",
           "columns of C per tile: 128, 192 or 256 (0: 128, 256 and the 128 x 192 tile); with tile-m, which twins to emit: "
           "128 x 128 (<kernel>__sm90), 128 x 256 (<kernel>__sm90_n256), 64 x 128 (<kernel>__sm90_m64), "
           "128 x 192 (<kernel>__sm90_n192), 64 x 192 (<kernel>__sm90_m64n192), and with tile-m=64 tile-n=256 only, "
           "the ping-pong 64 x 256 (<kernel>__sm90_m64n256); see hopper/Twins.h">,
    Option<"tileM", "tile-m", "int64_t", /*default=*/"0",
           "rows of C per tile: 64 (one consumer warpgroup; with tile-n=256 two, in ping-pong) or 128 (two); 0: both">,
    Option<"stages", "stages", "int64_t", /*default=*/"0",
           "shared-memory ring depth (0: the most that fit in 227 KiB)">,
    Option<"cluster", "cluster", "int64_t", /*default=*/"1",
           "CTAs per cluster: 1, 2 or 4 (adjacent tiles share A's tile by TMA multicast); 0: the 128 x 128 and 64-row tiles both alone and in stacked pairs sharing B (suffix x2), the 128 x 128 one also in fours sharing A (suffix x4), the others alone">,
    Option<"clusterM", "cluster-m", "bool", /*default=*/"false",
           "with cluster=2: pair vertically adjacent tiles (sharing B's tile by multicast) instead of side by side (sharing A's)">,
    Option<"rasterGroup", "raster-group", "int64_t", /*default=*/"8",
           "tile order: groups of this many tile rows, column by column inside a group (1..64; 0: 8)">,
    Option<"decodeRows", "decode-rows", "int64_t", /*default=*/"0",
           "with tile-m=0 tile-n=0: also decode twins (<kernel>__sm90_dec, <kernel>__sm90_dec32, ...) of 16, 32, ... up to this many rows of C (16, 32, 48 or 64; 0: none) by 64 columns, computed as C^T = B^T A^T, each for C of at most its rows">,
    Option<"wideRows", "wide-rows", "int64_t", /*default=*/"0",
           "with tile-m=0 tile-n=0: also swapped twins (<kernel>__sm90_sw80, ...) of 128 columns by 80, 96, ... up to this many rows of C (80, 96, 112 or 128; 0: none), computed as C^T = B^T A^T by two consumer warpgroups of 64 columns each, without K-clusters">,
    Option<"persistent", "persistent", "bool", /*default=*/"true",
           "launch one CTA per SM looping over tiles (else one CTA per tile)">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect", "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect", "::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect",
                           "::mlir::vector::VectorDialect"];
}

def KilnLowerAttentionSm90 : Pass<"kiln-lower-attention-sm90", "::mlir::ModuleOp"> {
  let summary = "CUDA sm_90a: an attention-shaped tile kernel also gets a TMA + wgmma, warp-specialised kernel";
  let description = [{
    A `tile.kernel` that is attention in FlashAttention's form (see hopper/AttentionMatch.h:
    a grid over 64-row query tiles, heads and batches; a loop over key tiles computing
    S = Q K^T, any row-wise program on S, and acc' = cast(P) V + f(acc); an elementwise
    epilogue stored to O) gets a second kernel `<name>__sm90_attn` in `gpu.module @kiln`: a
    producer warpgroup loading Q once and K/V tiles into a ring of `stages` 128B-swizzled
    stages by TMA, and two or three consumer warpgroups, each one instance of the program,
    running both products on wgmma (P from registers) and the program's own ops on the
    accumulator fragments. A loop that is an online softmax may have its keys split across
    a thread-block cluster (merged through distributed shared memory); grouped-query heads
    that share a K/V head may be folded into one program (the launch decides both). Its
    launch plan is the `kiln.launch_plan` attribute. For a kernel that is neither a GEMM nor
    attention, the module's `kiln.sm90` attribute says why.
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"0",
           "K/V ring depth (2..4; 0: the deepest that fits in 227 KiB, at most 4)">,
    Option<"consumers", "consumers", "int64_t", /*default=*/"0",
           "consumer warpgroups per CTA, one 64-row program each (2 or 3; 0: 3 at head dim 64 and 64 keys a step, else 2)">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect", "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect", "::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect",
                           "::mlir::vector::VectorDialect"];
}

def KilnSplitPortable : Pass<"kiln-split-portable", "::mlir::ModuleOp"> {
  let summary = "CUDA sm_90a: the portable kernel beside a twin moves to a gpu.module of its own";
  let description = [{
    In a `gpu.module` holding both sm_90a twins (gpu.func kernels with a
    `kiln.launch_plan`) and the portable kernel (one without), the portable kernel moves to
    a new `gpu.module @<name>_portable` beside it, with copies of the globals it uses. Each
    module then becomes PTX of its own: the runtime compiles the twins' for the GPU first
    and the fallback's on a second thread, so the first launch waits only for the code it
    runs. A module with no twin, or with nothing but twins, is left as it is. With
    `twin-modules`, each twin past the first also moves to a module of its own
    (`@<name>_twin1`, ...), so several twins (a GEMM's tile shapes) compile in parallel.
  }];
  let options = [
    Option<"twinModules", "twin-modules", "bool", /*default=*/"false",
           "also give each twin past the first a gpu.module of its own">,
  ];
}

#endif // KILN_PASSES
