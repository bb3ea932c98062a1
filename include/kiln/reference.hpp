#pragma once
#include <vector>

#include "kiln/export.hpp"
#include "kiln/tensor.hpp"

/// Host references in double precision (Eigen), for the verifier. Inputs are read through
/// their views (any dtype, any strides); results are row-major doubles.
namespace kiln::reference {

enum class Epilogue { none, bias_relu, bias_gelu };

/// C[M,N] = epilogue(A[M,K] @ B[K,N] + bias[N]); bias ignored for Epilogue::none.
KILN_API std::vector<double> gemm(const TensorView& a, const TensorView& b,
                                  const TensorView* bias, Epilogue epilogue);
/// Row-wise softmax of X[M,N].
KILN_API std::vector<double> softmax(const TensorView& x);
/// Elementwise X + Y, same dims.
KILN_API std::vector<double> add(const TensorView& x, const TensorView& y);
/// Y[m,n] = X[m,n] / sqrt(mean_n(X[m,:]^2) + eps) * W[n].
KILN_API std::vector<double> rmsnorm(const TensorView& x, const TensorView& w, double eps);

/// GELU, tanh approximation (the form cuBLASLt's epilogue and kiln's tile.gelu use).
KILN_API double gelu(double x);

} // namespace kiln::reference
