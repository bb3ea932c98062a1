// The eigen route of `kiln bench`, built once per x86-64 level (generic, v3: AVX2+FMA,
// v4: AVX-512) as a separate module so each keeps its own Eigen instantiations (Eigen's
// templates compiled with different -march flags would otherwise be merged by the linker).
// The kiln CLI loads the best one the CPU runs (eigen_route.hpp): kiln-cpu's JIT targets
// the host CPU, so Eigen must too for the comparison to be fair.
#include <Eigen/Dense>

#include <cmath>
#include <cstdint>

#ifndef KILN_EIGEN_ISA
#define KILN_EIGEN_ISA "generic"
#endif

namespace {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct Gemm {
  Mat a, b, c, res;
  Eigen::RowVectorXf bias;
  int epilogue = 0; // 0 none, 1 bias+ReLU, 2 bias+GELU, 3 bias + residual

  void run() {
    c.noalias() = a * b;
    if (epilogue == 1) c = (c.rowwise() + bias).cwiseMax(0.0f);
    if (epilogue == 2)
      c = (c.rowwise() + bias).unaryExpr([](float x) {
        return 0.5f * x * (1.0f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
      });
    if (epilogue == 3) c = (c + res).rowwise() + bias;
  }
};

} // namespace

extern "C" {

__attribute__((visibility("default"))) const char* kiln_eigen_isa() { return KILN_EIGEN_ISA; }

/// C[M,N] = epilogue(A[M,K] @ B[K,N] + bias[N] (+ R[M,N])), all row-major f32, copied in.
__attribute__((visibility("default"))) void* kiln_eigen_gemm_create(const float* a, const float* b, const float* bias,
                                                                    const float* res, int64_t M, int64_t N, int64_t K,
                                                                    int epilogue) {
  auto* g = new Gemm;
  g->a = Eigen::Map<const Mat>(a, M, K);
  g->b = Eigen::Map<const Mat>(b, K, N);
  g->c.resize(M, N);
  g->bias = bias ? Eigen::RowVectorXf(Eigen::Map<const Eigen::RowVectorXf>(bias, N)) : Eigen::RowVectorXf::Zero(N);
  if (res) g->res = Eigen::Map<const Mat>(res, M, N);
  g->epilogue = epilogue;
  return g;
}
__attribute__((visibility("default"))) void kiln_eigen_gemm_run(void* g) { static_cast<Gemm*>(g)->run(); }
__attribute__((visibility("default"))) const float* kiln_eigen_gemm_output(void* g) {
  return static_cast<Gemm*>(g)->c.data();
}
__attribute__((visibility("default"))) void kiln_eigen_gemm_destroy(void* g) { delete static_cast<Gemm*>(g); }

} // extern "C"
