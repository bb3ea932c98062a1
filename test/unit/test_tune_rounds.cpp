// The tuner's timing order (lib/Tune/Rounds.h): candidates timed together in rounds, so
// drift over a search falls on all of them alike.
#include <catch2/catch.hpp>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "Tune/Rounds.h"

using kiln::tune::detail::kTimingRounds;
using kiln::tune::detail::timingRounds;

namespace {
// Each candidate's blocks, in the order they run.
std::vector<std::vector<kiln::tune::detail::TimingBlock>> perCandidate(size_t n, int reps, int warmup) {
  std::vector<std::vector<kiln::tune::detail::TimingBlock>> out(n);
  for (const auto& round : timingRounds(n, reps, warmup))
    for (const auto& b : round) out.at(b.candidate).push_back(b);
  return out;
}
} // namespace

TEST_CASE("every candidate gets exactly its reps, spread evenly over the rounds", "[tune]") {
  for (int reps : {1, 2, 7, 10, 20, 23, 100}) {
    for (size_t n : {size_t(1), size_t(3), size_t(19)}) {
      INFO("reps " << reps << ", " << n << " candidates");
      const auto rounds = timingRounds(n, reps, 3);
      CHECK(int(rounds.size()) == std::min(reps, kTimingRounds));
      for (const auto& blocks : perCandidate(n, reps, 3)) {
        REQUIRE(blocks.size() == rounds.size()); // one block in every round
        int total = 0, least = reps, most = 0;
        for (const auto& b : blocks) {
          total += b.reps;
          least = std::min(least, b.reps);
          most = std::max(most, b.reps);
        }
        CHECK(total == reps);
        CHECK(least >= 1);
        CHECK(most - least <= 1);
      }
    }
  }
}

TEST_CASE("a candidate's first block warms up fully and each later one once", "[tune]") {
  for (const auto& blocks : perCandidate(4, 20, 3)) {
    REQUIRE(blocks.size() == 10);
    CHECK(blocks[0].warmup == 3);
    for (size_t r = 1; r < blocks.size(); ++r) CHECK(blocks[r].warmup == 1);
  }
  for (const auto& blocks : perCandidate(2, 5, 0)) // no warm-up asked for: none added
    for (const auto& b : blocks) CHECK(b.warmup == 0);
}

TEST_CASE("each round runs every candidate once, starting one further on than the last", "[tune]") {
  const auto rounds = timingRounds(3, 20, 1);
  REQUIRE(rounds.size() == 10);
  for (size_t r = 0; r < rounds.size(); ++r) {
    REQUIRE(rounds[r].size() == 3);
    CHECK(rounds[r][0].candidate == r % 3);
    CHECK(rounds[r][1].candidate == (r + 1) % 3);
    CHECK(rounds[r][2].candidate == (r + 2) % 3);
  }
}

namespace {
using kiln::tune::detail::timeInRounds;

// A timer like profile::time: calls `once` count times, a time per call (the launch's index
// in the whole search, so samples can be traced back), optionally failing after call `failAfter`.
struct FakeTimer {
  int launches = 0;
  int failAfterCall = -1; // throw once, after this many calls in total (a fault seen at sync)
  bool failBeforeAny = false;
  std::vector<double> operator()(size_t count, const std::function<void()>& once) {
    if (failBeforeAny) throw std::runtime_error("cannot allocate the flush buffer");
    std::vector<double> ms;
    for (size_t i = 0; i < count; ++i) {
      once();
      ++launches;
      if (launches == failAfterCall) {
        failAfterCall = -1;
        throw std::runtime_error("an illegal address, seen at the end event");
      }
      ms.push_back(double(launches));
    }
    return ms;
  }
};
} // namespace

TEST_CASE("a candidate whose launch throws while timed is dropped, and the others still get all their reps", "[tune]") {
  FakeTimer timer;
  std::vector<size_t> launched, dropped;
  int rounds = 0, secondLaunches = 0;
  auto samples = timeInRounds(
      3, 20, 2, timer,
      [&](size_t c) {
        if (c == 1 && ++secondLaunches == 5) throw std::runtime_error("launch failed");
        launched.push_back(c);
      },
      [&](size_t c, const std::exception& e) {
        dropped.push_back(c);
        CHECK(std::string(e.what()) == "launch failed");
      },
      [&] { ++rounds; });
  CHECK(dropped == std::vector<size_t>{1});
  CHECK(samples[0].size() == 20);
  CHECK(samples[1].empty());
  CHECK(samples[2].size() == 20);
  CHECK(rounds == 10);
}

TEST_CASE("a fault seen after a launch returned is charged to that launch's candidate", "[tune]") {
  // Round 0 runs candidate 0's block (2 warm-ups + 2 timed), then candidate 1's: the fault
  // surfaces after candidate 0's last launch returned, before candidate 1's first.
  FakeTimer timer;
  timer.failAfterCall = 4;
  std::vector<size_t> dropped;
  auto samples = timeInRounds(
      2, 20, 2, timer, [](size_t) {}, [&](size_t c, const std::exception&) { dropped.push_back(c); }, [] {});
  CHECK(dropped == std::vector<size_t>{0});
  CHECK(samples[0].empty());
  CHECK(samples[1].size() == 20);
}

TEST_CASE("a timer that fails before any launch is no candidate's fault: the error propagates", "[tune]") {
  FakeTimer timer;
  timer.failBeforeAny = true;
  int drops = 0;
  CHECK_THROWS_WITH(timeInRounds(
                        3, 5, 1, timer, [](size_t) {}, [&](size_t, const std::exception&) { ++drops; }, [] {}),
                    "cannot allocate the flush buffer");
  CHECK(drops == 0);
}

TEST_CASE("warm-up launches are run but not counted, and no candidates means no rounds", "[tune]") {
  FakeTimer timer;
  int rounds = 0;
  auto samples = timeInRounds(
      2, 4, 3, timer, [](size_t) {}, [](size_t, const std::exception&) {}, [&] { ++rounds; });
  // 4 rounds: first blocks 3 warm-ups + 1 timed, later 1 + 1; two candidates.
  CHECK(timer.launches == 2 * (4 + 3 + 3 * 1));
  CHECK(samples[0].size() == 4);
  CHECK(samples[1].size() == 4);
  CHECK(samples[0][0] == 4.0); // candidate 0's first timed launch follows its 3 warm-ups
  CHECK(rounds == 4);
  rounds = 0;
  CHECK(timeInRounds(0, 4, 3, timer, [](size_t) {}, [](size_t, const std::exception&) {}, [&] { ++rounds; }).empty());
  CHECK(rounds == 0);
}
