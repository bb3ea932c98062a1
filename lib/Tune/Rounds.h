#pragma once
// Internal: the order in which the tuner times its verified candidates.
//
// Timed one after another, each candidate in its own block of launches, candidates are
// compared across time: whatever drifts while a search runs (clocks and temperature on a
// GPU, a neighbour's load on the CPU) lands on whichever candidate happened to be timed
// then. On an H100 two candidates that launch the very same kernel measured 0.1805 and
// 0.1908 ms that way, p10-p90 not overlapping. So each candidate's launches are spread
// over rounds: in every round each candidate runs a short block, the round's first
// candidate moving on by one each round, and a candidate's figure is the summary of all
// its blocks' launches.
#include <algorithm>
#include <cstddef>
#include <vector>

namespace kiln::tune::detail {

/// At most this many rounds (fewer when there are fewer timed launches per candidate).
inline constexpr int kTimingRounds = 10;

/// One block: `warmup` untimed launches of `candidate`, then `reps` timed ones.
struct TimingBlock {
  std::size_t candidate = 0;
  int reps = 0;
  int warmup = 0;
};

/// The rounds for `n` candidates of `reps` timed launches each (reps >= 1, warmup >= 0):
/// min(reps, kTimingRounds) rounds, each holding one block per candidate. Invariants:
///  - a candidate's blocks' reps add up to `reps`, and differ by at most one between rounds;
///  - its first block warms up `warmup` times; each later one min(warmup, 1) times (the
///    launches before it were another kernel's);
///  - round r starts at candidate r mod n and goes on in order, wrapping around: with
///    n > 1 and more than one round, no candidate is timed first in every round.
inline std::vector<std::vector<TimingBlock>> timingRounds(std::size_t n, int reps, int warmup) {
  const int rounds = std::min(reps, kTimingRounds);
  std::vector<std::vector<TimingBlock>> out(static_cast<std::size_t>(rounds));
  for (int r = 0; r < rounds; ++r) {
    const int blockReps = reps / rounds + (r < reps % rounds ? 1 : 0);
    for (std::size_t i = 0; i < n; ++i)
      out[std::size_t(r)].push_back({(std::size_t(r) + i) % n, blockReps, r == 0 ? warmup : std::min(warmup, 1)});
  }
  return out;
}

} // namespace kiln::tune::detail
