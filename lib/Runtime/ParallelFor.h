#pragma once
// Internal: one way kiln spreads independent work over threads (Runtime::compile_all, the
// tuner's compiles). Each index is taken once, in order of first come.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <system_error>
#include <thread>
#include <vector>

namespace kiln::detail {

/// Calls work(i) for every i in [0, n) on up to `threads` threads (0: one per core), the
/// caller's among them, and returns when every call has. `work` must not throw (catch per
/// item). Where fewer threads can be started, those there do it all.
inline void parallelFor(size_t n, int threads, const std::function<void(size_t)>& work) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < n; i = next++) work(i);
  };
  const size_t want = threads > 0 ? size_t(threads) : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  try {
    for (size_t t = 1; t < std::min(want, n); ++t) pool.emplace_back(worker);
  } catch (const std::system_error&) { // no more threads: the caller's and those started share the rest
  }
  worker();
  for (std::thread& t : pool) t.join();
}

} // namespace kiln::detail
