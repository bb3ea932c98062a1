#pragma once
// The eigen route's loader: picks the module built for the best x86-64 level this CPU
// runs (kiln-eigen-v4.so, -v3, then -generic, next to libkiln in <exe>/../lib).
#include <cstdint>
#include <memory>
#include <string>

class EigenGemm {
public:
  /// Throws kiln::Error(NotFound) naming the directory searched when no module loads.
  EigenGemm(const float* a, const float* b, const float* bias, const float* res, int64_t M, int64_t N, int64_t K,
            int epilogue);
  ~EigenGemm();
  EigenGemm(const EigenGemm&) = delete;
  EigenGemm& operator=(const EigenGemm&) = delete;
  void run();
  const float* output() const;
  /// "v4 (AVX-512)", "v3 (AVX2, FMA)" or "generic (SSE2)": what Eigen was compiled for.
  static std::string isa();

private:
  void* handle_ = nullptr;
};
