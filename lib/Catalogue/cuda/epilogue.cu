// The separate elementwise kernel of an eager framework path: after a library GEMM wrote
// C = A @ B, one more pass over C applies what the library call did not fuse,
//   C = act(C + bias[col]) + R        (bias and R optional: null pointers)
// in place. Compiled with NVRTC (kiln::compile_cuda); the route that uses it is
// `framework-eager` in kiln bench and kiln-mlp.
//
//   -DKILN_DTYPE=0|1|2   f32 | bf16 | f16
//   act: 0 none, 1 ReLU, 2 GELU (tanh form)
//   launch: block 256 threads; grid (ceil(N / 256), min(M, 65535)), rows strided by gridDim.y
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#ifndef KILN_DTYPE
#define KILN_DTYPE 1
#endif
#if KILN_DTYPE == 1
typedef __nv_bfloat16 T;
__device__ __forceinline__ float toF(T x) { return __bfloat162float(x); }
__device__ __forceinline__ T fromF(float x) { return __float2bfloat16(x); }
#elif KILN_DTYPE == 2
typedef __half T;
__device__ __forceinline__ float toF(T x) { return __half2float(x); }
__device__ __forceinline__ T fromF(float x) { return __float2half(x); }
#else
typedef float T;
__device__ __forceinline__ float toF(T x) { return x; }
__device__ __forceinline__ T fromF(float x) { return x; }
#endif

extern "C" __global__ void __launch_bounds__(256)
epilogue(T* C, const T* bias, const T* R, int M, int N, int ldc, int ldr, int act) {
  const int col = blockIdx.x * 256 + threadIdx.x;
  if (col >= N) return;
  const float b = bias ? toF(bias[col]) : 0.0f;
  for (int row = blockIdx.y; row < M; row += gridDim.y) {
    T* c = C + size_t(row) * ldc + col;
    float x = toF(*c) + b;
    if (act == 1) x = fmaxf(x, 0.0f);
    if (act == 2) x = 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    if (R) x += toF(R[size_t(row) * ldr + col]);
    *c = fromF(x);
  }
}
