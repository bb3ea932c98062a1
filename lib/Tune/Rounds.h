#pragma once
// Internal: the order in which the tuner times its verified candidates.
//
// Timed one after another, each candidate in its own block of launches, candidates are
// compared across time: whatever drifts while a search runs (clocks and temperature on a
// GPU, a neighbour's load on the CPU) lands on whichever candidate happened to be timed
// then. On an H100 two candidates that launch the very same kernel measured 0.1805 and
// 0.1908 ms that way, p10-p90 not overlapping (2026-12-05, `scripts/device-run.sh tunetwin`,
// docs/benchmarks/2026-12-05-h100-hopper-gemm-ring-split/). So each candidate's launches are spread
// over rounds: in every round each candidate runs a short block, the round's first
// candidate moving on by one each round, and a candidate's figure is the summary of all
// its blocks' launches.
#include <algorithm>
#include <cstddef>
#include <exception>
#include <functional>
#include <vector>

namespace kiln::tune::detail {

/// At most this many rounds (fewer when there are fewer timed launches per candidate).
inline constexpr int kTimingRounds = 10;
/// The rounds a search of `reps` timed launches per candidate takes.
inline int timingRoundCount(int reps) { return std::min(reps, kTimingRounds); }

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
  const int rounds = timingRoundCount(reps);
  std::vector<std::vector<TimingBlock>> out(static_cast<std::size_t>(rounds));
  for (int r = 0; r < rounds; ++r) {
    const int blockReps = reps / rounds + (r < reps % rounds ? 1 : 0);
    for (std::size_t i = 0; i < n; ++i)
      out[std::size_t(r)].push_back({(std::size_t(r) + i) % n, blockReps, r == 0 ? warmup : std::min(warmup, 1)});
  }
  return out;
}

/// One launch of a round: `candidate`'s, timed or a warm-up (timed and dropped).
struct TimingLaunch {
  std::size_t candidate = 0;
  bool timed = false;
};

/// Times `n` candidates in rounds and returns each one's timed samples (reps of them; none
/// for a candidate dropped). Each round's launches, blocks in order, each block's warm-ups
/// then its timed ones, go to one call of `timeSeq(count, once)`, which must call `once()`
/// `count` times, in order, each call one launch, and return one time per call (as
/// profile::time does). `launch(c)` launches candidate c. Where the call throws:
///  - inside a launch: that launch's candidate is dropped (`drop(c, error)`);
///  - between launches (a kernel's fault is seen when its end is awaited, after it was
///    enqueued): the candidate of the launch before;
///  - before any launch: no candidate's fault (the timer's own, e.g. its flush buffer): it
///    propagates.
/// A round with a dropped candidate is run again without it (a dropped candidate's earlier
/// samples are discarded with it). `roundDone()` after each round; no rounds when n = 0.
template <class TimeSeq, class LaunchFn, class DropFn, class RoundFn>
std::vector<std::vector<double>> timeInRounds(std::size_t n, int reps, int warmup, TimeSeq&& timeSeq,
                                              LaunchFn&& launch, DropFn&& drop, RoundFn&& roundDone) {
  std::vector<std::vector<double>> samples(n);
  if (n == 0) return samples;
  std::vector<bool> alive(n, true);
  for (const std::vector<TimingBlock>& round : timingRounds(n, reps, warmup)) {
    for (;;) {
      std::vector<TimingLaunch> seq;
      for (const TimingBlock& blk : round) {
        if (!alive[blk.candidate]) continue;
        for (int w = 0; w < blk.warmup; ++w) seq.push_back({blk.candidate, false});
        for (int t = 0; t < blk.reps; ++t) seq.push_back({blk.candidate, true});
      }
      if (seq.empty()) break;
      std::size_t next = 0;
      bool inLaunch = false;
      try {
        const std::vector<double> ms = timeSeq(seq.size(), std::function<void()>([&] {
                                                 inLaunch = true;
                                                 launch(seq[next].candidate);
                                                 inLaunch = false;
                                                 ++next;
                                               }));
        for (std::size_t i = 0; i < seq.size() && i < ms.size(); ++i)
          if (seq[i].timed) samples[seq[i].candidate].push_back(ms[i]);
        break;
      } catch (const std::exception& e) {
        if (!inLaunch && next == 0) throw;
        const std::size_t who = seq[inLaunch ? next : next - 1].candidate;
        alive[who] = false;
        samples[who].clear();
        drop(who, e);
      }
    }
    roundDone();
  }
  return samples;
}

} // namespace kiln::tune::detail
