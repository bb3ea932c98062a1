// C = epilogue(A @ B + bias), hand-written in CUDA C++: the `cuda` route of `kiln bench`,
// compiled at run time with NVRTC (kiln::compile_cuda). What a CUDA engineer writes in an
// afternoon: WMMA tensor-core fragments for bf16/f16 (a SIMT loop for f32), a 128x128x32
// CTA tile, operands staged in shared memory with a register prefetch of the next k-step,
// edges masked. Row-major A[M,K], B[K,N], C[M,N] with row strides lda, ldb, ldc; bias[N]
// contiguous (may be null when KILN_EPILOGUE is 0).
//
//   -DKILN_DTYPE=0|1|2      f32 | bf16 | f16
//   -DKILN_EPILOGUE=0|1|2   none | bias + ReLU | bias + GELU (tanh form)
//   launch: block 256 threads; grid (ceil(N/BN), ceil(M/BM)): BN=BM=128 (bf16/f16), 64 (f32)
//   vec: 1 when lda, ldb are multiples of 8 and A, B are 16-byte aligned (16-byte loads)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#ifndef KILN_DTYPE
#define KILN_DTYPE 1
#endif
#ifndef KILN_EPILOGUE
#define KILN_EPILOGUE 0
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

__device__ __forceinline__ float epilogue(float acc, const T* bias, int col) {
#if KILN_EPILOGUE == 0
  return acc;
#else
  float x = acc + toF(bias[col]);
#if KILN_EPILOGUE == 1
  return fmaxf(x, 0.0f);
#else
  return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
#endif
#endif
}

#if KILN_DTYPE != 0
using namespace nvcuda;

constexpr int BM = 128, BN = 128, BK = 32, PAD = 8; // PAD: rows of smem start on different banks
constexpr int THREADS = 256;                        // 8 warps: 2 along M x 4 along N, 64x32 each

// One 8-element chunk of a rows x cols tile at (r, c) into registers, zero outside the matrix.
__device__ __forceinline__ uint4 loadChunk(const T* p, int ld, int rows, int cols, int r, int c, int vec) {
  uint4 v = make_uint4(0, 0, 0, 0);
  if (r >= rows) return v;
  const T* src = p + size_t(r) * ld + c;
  if (vec && c + 8 <= cols) return *reinterpret_cast<const uint4*>(src);
  T* e = reinterpret_cast<T*>(&v);
  for (int i = 0; i < 8; ++i)
    if (c + i < cols) e[i] = src[i];
  return v;
}

extern "C" __global__ void __launch_bounds__(THREADS)
gemm_epilogue(const T* A, const T* B, const T* bias, T* C, int M, int N, int K, int lda, int ldb, int ldc, int vec) {
  __shared__ __align__(128) T As[2][BM][BK + PAD];
  __shared__ __align__(128) T Bs[2][BK][BN + PAD];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / 4, wn = warp % 4;
  const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  // Each thread moves two 8-element chunks of A (128x32) and two of B (32x128) per k-step.
  uint4 ra[2], rb[2];
  auto fetch = [&](int k0) {
    for (int h = 0; h < 2; ++h) {
      int ca = tid + h * THREADS; // A: 4 chunks per row
      ra[h] = loadChunk(A, lda, M, K, bm + ca / 4, k0 + (ca % 4) * 8, vec);
      int cb = tid + h * THREADS; // B: 16 chunks per row
      rb[h] = loadChunk(B, ldb, K, N, k0 + cb / 16, bn + (cb % 16) * 8, vec);
    }
  };
  auto stash = [&](int buf) {
    for (int h = 0; h < 2; ++h) {
      int ca = tid + h * THREADS, cb = tid + h * THREADS;
      *reinterpret_cast<uint4*>(&As[buf][ca / 4][(ca % 4) * 8]) = ra[h];
      *reinterpret_cast<uint4*>(&Bs[buf][cb / 16][(cb % 16) * 8]) = rb[h];
    }
  };

  const int steps = (K + BK - 1) / BK;
  fetch(0);
  stash(0);
  __syncthreads();
  for (int s = 0; s < steps; ++s) {
    const int buf = s & 1;
    if (s + 1 < steps) fetch((s + 1) * BK); // in flight while the tensor cores work
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a[4];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b[2];
      for (int i = 0; i < 4; ++i) wmma::load_matrix_sync(a[i], &As[buf][wm * 64 + i * 16][kk], BK + PAD);
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], &Bs[buf][kk][wn * 32 + j * 16], BN + PAD);
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    if (s + 1 < steps) stash(buf ^ 1); // the other buffer: its readers finished last step
    __syncthreads();
  }

  // Epilogue: each warp stages one 16x16 fragment at a time in (now idle) shared memory,
  // then its 32 lanes apply bias + activation to 8 elements each and store them.
  float* stage = reinterpret_cast<float*>(&As[0][0][0]) + warp * 256;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) {
      wmma::store_matrix_sync(stage, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      const int r = lane / 2, c0 = (lane % 2) * 8;
      const int gr = bm + wm * 64 + i * 16 + r;
      for (int e = 0; e < 8; ++e) {
        const int gc = bn + wn * 32 + j * 16 + c0 + e;
        if (gr < M && gc < N) C[size_t(gr) * ldc + gc] = fromF(epilogue(stage[r * 16 + c0 + e], bias, gc));
      }
      __syncwarp();
    }
}

#else // f32: no f32 tensor-core WMMA without TF32, which would change the numbers

constexpr int BM = 64, BN = 64, BK = 16, THREADS = 256; // each thread: a 4x4 block of C

extern "C" __global__ void __launch_bounds__(THREADS)
gemm_epilogue(const T* A, const T* B, const T* bias, T* C, int M, int N, int K, int lda, int ldb, int ldc, int vec) {
  __shared__ float As[BK][BM + 4]; // A transposed: a thread reads 4 consecutive rows
  __shared__ float Bs[BK][BN + 4];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int e = tid; e < BM * BK; e += THREADS) {
      int r = e / BK, c = e % BK;
      As[c][r] = (bm + r < M && k0 + c < K) ? A[size_t(bm + r) * lda + k0 + c] : 0.0f;
      int kr = e / BN, n = e % BN;
      Bs[kr][n] = (k0 + kr < K && bn + n < N) ? B[size_t(k0 + kr) * ldb + bn + n] : 0.0f;
    }
    __syncthreads();
    for (int k = 0; k < BK; ++k)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] += As[k][ty * 4 + i] * Bs[k][tx * 4 + j];
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      int gr = bm + ty * 4 + i, gc = bn + tx * 4 + j;
      if (gr < M && gc < N) C[size_t(gr) * ldc + gc] = epilogue(acc[i][j], bias, gc);
    }
}
#endif
