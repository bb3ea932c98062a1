// Z = X + Y, the simplest elementwise kernel.
// The kernel is the catalogue's (lib/Catalogue/Kernels.cpp shows its DSL source); this
// example is the engine side: compile once, launch on your own buffers, verify.
#include "example.hpp"

int main() {
  kiln::Kernel k = kiln::catalogue::add(kiln::DType::f32);
  return example::run(k, "add", {1000, 129}, kiln::DType::f32);
}
