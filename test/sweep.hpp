#pragma once
// A sweep runs one check over every case of a list (each catalogue GEMM in each dtype, say).
// Its time goes to the CUDA toolkit's ptxas and nvJitLink, which are not instrumented, once per
// case. Under the sanitizers (`make sanitize` sets KILN_TEST_SWEEP=ends) a sweep takes its
// first and last cases: kiln's own code on the path still runs under ASan + UBSan or TSan, and
// the plain build (`make test`) takes every case. Any other value is an error.
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::testing {

template <class T>
std::vector<T> sweep(std::vector<T> all) {
  const char* set = std::getenv("KILN_TEST_SWEEP");
  const std::string_view how = set != nullptr ? set : "all";
  if (how != "all" && how != "ends")
    throw std::invalid_argument("KILN_TEST_SWEEP is '" + std::string(how) + "'; expected all or ends");
  if (how == "all" || all.size() <= 2) return all;
  return {all.front(), all.back()};
}

} // namespace kiln::testing
