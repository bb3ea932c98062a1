// detail::parallelFor bounds the threads of compile_all, the tuner and a kernel's LLVM
// modules by RuntimeOptions::compile_threads: it must never run more at once than asked,
// and must run every index exactly once.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "Runtime/ParallelFor.h"

namespace {

struct Observed {
  int most_at_once = 0;
  std::vector<int> calls;
  std::vector<std::thread::id> threads;
};

// Every call sleeps a little, so threads that may overlap do, even on a 2-core machine.
Observed run(size_t n, int threads) {
  Observed o;
  o.calls.assign(n, 0);
  o.threads.resize(n);
  std::atomic<int> now{0}, most{0};
  std::vector<std::atomic<int>> calls(n);
  kiln::detail::parallelFor(n, threads, [&](size_t i) {
    const int at_once = ++now;
    for (int m = most.load(); at_once > m && !most.compare_exchange_weak(m, at_once);) {
    }
    ++calls[i];
    o.threads[i] = std::this_thread::get_id();
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    --now;
  });
  o.most_at_once = most;
  for (size_t i = 0; i < n; ++i) o.calls[i] = calls[i];
  return o;
}

} // namespace

TEST_CASE("parallelFor runs every index once on at most the threads it is given", "[parallel]") {
  for (int threads : {1, 2, 3, 5}) {
    CAPTURE(threads);
    const Observed o = run(24, threads);
    CHECK(o.most_at_once <= threads);
    CHECK(o.most_at_once >= (threads > 1 ? 2 : 1)); // it does spread the work
    for (int c : o.calls) CHECK(c == 1);
  }
}

TEST_CASE("parallelFor with one thread works on the caller's thread alone", "[parallel]") {
  const Observed o = run(6, 1);
  for (const std::thread::id& t : o.threads) CHECK(t == std::this_thread::get_id());
}

TEST_CASE("parallelFor starts no more threads than there are indices, and none for no work", "[parallel]") {
  CHECK(run(2, 8).most_at_once <= 2);
  CHECK(run(0, 4).calls.empty());
}
