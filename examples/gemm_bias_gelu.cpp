// C = gelu(A @ B + bias), GELU in its tanh form, f16 in and out.
// The kernel is the catalogue's (lib/Catalogue/Kernels.cpp shows its DSL source); this
// example is the engine side: compile once, launch on your own buffers, verify.
#include "example.hpp"

int main() {
  kiln::Kernel k = kiln::catalogue::gemm_bias_gelu(kiln::DType::f16);
  return example::run(k, "gemm_bias_gelu", {129, 1000, 7}, kiln::DType::f16);
}
