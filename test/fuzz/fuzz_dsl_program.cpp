// libFuzzer target: random DSL programs chosen by the fuzzer's bytes (test/random_programs.hpp),
// run on the CPU backend and compared with a direct f64 evaluation of the same expression
// tree. A program that kiln traces, compiles and runs to a different answer (or a crash in
// kiln on the way) is a finding: the program is printed and the process aborts.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kiln/error.hpp"
#include "../random_programs.hpp"

using namespace kiln;
using namespace kiln::testing::random_programs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t pos = 0;
  // One byte per draw; past the end, zeros (the shortest programs).
  const std::function<uint64_t()> next = [&]() -> uint64_t { return pos < size ? data[pos++] : 0; };
  std::shared_ptr<Node> tree = randomTree(next, 4);
  const int64_t tileRows[] = {1, 4, 8, 16}, tileCols[] = {8, 16, 32, 64};
  const int64_t tm = tileRows[next() % 4], tn = tileCols[next() % 4];
  const int64_t M = 1 + int64_t(next() % 40), N = 1 + int64_t(next() % 90);
  HostTensor x(DType::f32, {M, N}), y(DType::f32, {M, N});
  for (int64_t i = 0; i < M * N; ++i) // values in [-2, 2] in steps of 1/8, from the bytes left
    x.set(i, float(int(next() % 33) - 16) / 8.0f), y.set(i, float(int(next() % 33) - 16) / 8.0f);
  // KILN_FUZZ_PRINT=1: say which program an input is before running it (for a timeout,
  // which ends the process before the program could be printed).
  if (const char* p = std::getenv("KILN_FUZZ_PRINT"); p && *p == '1')
    std::fprintf(stderr, "program %s on %lldx%lld, tiles %lldx%lld\n", show(*tree).c_str(), (long long)M, (long long)N,
                 (long long)tm, (long long)tn);
  // A fresh runtime per input: its compiled kernels (and their JITs) go with it.
  Runtime rt = Runtime::create(Backend::cpu, {.cache_dir = "off"});
  double worst = 0;
  int bad = 0;
  try {
    bad = compareWithEval(rt, *tree, tm, tn, x, y, "fuzzed", worst);
  } catch (const Error& e) { // every generated program is valid: an error is a finding too
    std::fprintf(stderr, "kiln refused a valid program: %s\n", e.what());
    bad = -1;
  }
  if (bad != 0) {
    std::fprintf(stderr, "program %s on %lldx%lld, tiles %lldx%lld: %d elements off (worst %g)\n", show(*tree).c_str(),
                 (long long)M, (long long)N, (long long)tm, (long long)tn, bad, worst);
    std::abort();
  }
  return 0;
}
