// The tuner's timing order (lib/Tune/Rounds.h): candidates timed together in rounds, so
// drift over a search falls on all of them alike.
#include <catch2/catch.hpp>

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
