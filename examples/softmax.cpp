// Row-wise softmax over rows longer than a tile: an online pass, then a write pass.
// The kernel is the catalogue's (lib/Catalogue/Kernels.cpp shows its DSL source); this
// example is the engine side: compile once, launch on your own buffers, verify.
#include "example.hpp"

int main() {
  kiln::Kernel k = kiln::catalogue::softmax(kiln::DType::bf16);
  return example::run(k, "softmax", {127, 4097}, kiln::DType::bf16);
}
