// Y = X / sqrt(mean(X^2) + eps) * W, a reduction then a scaled write.
// The kernel is the catalogue's (lib/Catalogue/Kernels.cpp shows its DSL source); this
// example is the engine side: compile once, launch on your own buffers, verify.
#include "example.hpp"

int main() {
  kiln::Kernel k = kiln::catalogue::rmsnorm(kiln::DType::bf16);
  return example::run(k, "rmsnorm", {7, 1000}, kiln::DType::bf16);
}
