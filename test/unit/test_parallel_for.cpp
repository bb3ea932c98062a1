// detail::parallelFor bounds the threads of compile_all, the tuner and a kernel's LLVM
// modules by RuntimeOptions::compile_threads: it must never run more at once than asked,
// start no thread it has no work for, and run every index exactly once.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "Runtime/ParallelFor.h"

namespace {

/// The threads of this process now (Linux: /proc/self/status).
int threadsNow() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

struct Observed {
  int most_at_once = 0;     // calls running at the same time, at most
  int most_threads = 0;     // the process's threads during the calls, at most
  std::vector<int> calls;   // per index
  std::vector<std::thread::id> threads;
};

// Index 0 waits (up to 10 s) until a second call is running where more than one thread may
// be, so that "it spreads the work" does not depend on how soon the system starts a thread;
// every call then sleeps a little, so threads that may overlap do.
Observed run(size_t n, int threads) {
  Observed o;
  o.calls.assign(n, 0);
  o.threads.resize(n);
  std::atomic<int> now{0}, most{0}, mostThreads{0};
  std::vector<std::atomic<int>> calls(n);
  auto raise = [](std::atomic<int>& m, int v) {
    for (int seen = m.load(); v > seen && !m.compare_exchange_weak(seen, v);) {
    }
  };
  kiln::detail::parallelFor(n, threads, [&](size_t i) {
    raise(most, ++now);
    ++calls[i];
    o.threads[i] = std::this_thread::get_id();
    if (i == 0 && threads > 1 && n > 1)
      for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
           now.load() < 2 && std::chrono::steady_clock::now() < until;)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    raise(mostThreads, threadsNow());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    --now;
  });
  o.most_at_once = most;
  o.most_threads = mostThreads;
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
  std::thread([] {}).join(); // as below
  const int before = threadsNow();
  const Observed o = run(6, 1);
  for (const std::thread::id& t : o.threads) CHECK(t == std::this_thread::get_id());
  CHECK(o.most_threads == before); // and starts none
}

TEST_CASE("parallelFor starts no more threads than there are indices, and calls nothing for no work", "[parallel]") {
  std::thread([] {}).join(); // a sanitizer's own thread, started with the first one, is up now
  const int before = threadsNow();
  REQUIRE(before > 0);
  CHECK(run(2, 8).most_threads == before + 1); // the caller's and one more, not seven
  CHECK(run(3, 2).most_threads == before + 1); // as many as asked when there is more work
  bool called = false;
  kiln::detail::parallelFor(0, 4, [&](size_t) { called = true; });
  CHECK_FALSE(called);
}
