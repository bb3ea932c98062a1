// The GPU suite's entry: with no usable GPU it says why and exits 77, which ctest reports
// as "Skipped" (never as passed). On the H200 it runs everything tagged [gpu].
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "kiln/runtime.hpp"

int main(int argc, char** argv) {
  kiln::Runtime rt = kiln::Runtime::create(kiln::Backend::automatic);
  if (rt.backend() != kiln::Backend::cuda) {
    std::printf("SKIPPED: the GPU suite needs a CUDA device: %s\n", rt.describe().c_str());
    return 77;
  }
  std::printf("GPU suite on %s\n", rt.describe().c_str());
  return Catch::Session().run(argc, argv);
}
