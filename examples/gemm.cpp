// C = A @ B with the catalogue's default 64x64x32 tiles.
// The kernel is the catalogue's (lib/Catalogue/Kernels.cpp shows its DSL source); this
// example is the engine side: compile once, launch on your own buffers, verify.
#include "example.hpp"

int main() {
  kiln::Kernel k = kiln::catalogue::gemm(kiln::DType::f32);
  return example::run(k, "gemm", {1000, 127, 129}, kiln::DType::f32);
}
