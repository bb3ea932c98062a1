// profile::judge: the decision a lifecycle report exists for. Per (kernel, shape, dtype), each
// route beside the baseline route (the framework path): its warm speedup, whether that clears
// the user's threshold, and after how many calls its cold cost (compile, tuning) is repaid.
#include "kiln/profile.hpp"

#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "kiln/error.hpp"
#include "Profile/Verdict.h"

namespace kiln::profile {

namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

/// The measured cold parts of a row: import (charged to a route's first row), compile, first
/// run, tuning. Parts not measured count as nothing, as the HTML report's cold bars.
double coldMs(const Row& r) {
  return r.import_ms.value_or(0) + r.compile_ms.value_or(0) + r.first_run_ms.value_or(0) + r.tune_ms.value_or(0);
}

/// The time a row is judged by: one pass of the model where the row times a model
/// (model_ms), else the warm median.
std::optional<double> timeOf(const Row& r) {
  if (r.model_ms) return r.model_ms;
  return r.warm ? std::optional<double>(r.warm->median) : std::nullopt;
}

} // namespace

namespace detail {
void checkThreshold(double accept) {
  if (!std::isfinite(accept) || accept <= 0)
    throw Error(ErrorKind::InvalidArgument,
                "the acceptance threshold must be a speedup above 0 (e.g. 1.10), got " + fixed(accept, 3));
}
} // namespace detail

void judge(std::vector<Row>& rows, double accept, const std::string& baseline) {
  detail::checkThreshold(accept);
  using Key = std::tuple<std::string, std::string, std::string>;
  std::map<Key, const Row*> base;
  for (const Row& r : rows)
    if (r.route == baseline) base.emplace(Key{r.kernel, r.shape, r.dtype}, &r);
  const std::string threshold = fixed(accept, 2) + "x";
  for (Row& r : rows) {
    if (r.route == baseline) continue;
    r.accept = accept;
    r.speedup.reset(), r.clears.reset(), r.break_even_calls.reset();
    const std::string what = r.kernel + " " + r.shape + " " + r.dtype;
    if (r.reference_ok && !*r.reference_ok) {
      r.clears = false;
      r.verdict = r.route + " is wrong here: it fails verification on " + what +
                  (r.rel_err ? " (relative error " + fixed(*r.rel_err, 6) + ")" : "") + "; not timed, never adopt it";
      continue;
    }
    auto it = base.find(Key{r.kernel, r.shape, r.dtype});
    const Row* b = it == base.end() ? nullptr : it->second;
    if (!b || !timeOf(*b) || !b->reference_ok || !*b->reference_ok) {
      r.verdict = "no verified, timed " + baseline + " row for " + what + " to compare with";
      continue;
    }
    if (!timeOf(r) || !r.reference_ok) {
      r.verdict = r.route + " was not " + (timeOf(r) ? "verified" : "timed") + " on " + what + ": no verdict";
      continue;
    }
    const double mine = *timeOf(r), theirs = *timeOf(*b);
    const double speedup = theirs / mine;
    r.speedup = speedup;
    r.clears = speedup >= accept;
    // cold_r + n warm_r < cold_b + n warm_b  <=>  n > (cold_r - cold_b) / (warm_b - warm_r).
    const double gain = theirs - mine, extra = coldMs(r) - coldMs(*b);
    // Cold figures come with a first run (kiln-mlp's operator rows have none: the block's
    // row carries its compile): without them the break-even is unknown, not 0.
    const bool coldKnown = r.first_run_ms && b->first_run_ms;
    if (gain > 0 && coldKnown) r.break_even_calls = extra <= 0 ? 0.0 : std::floor(extra / gain) + 1;
    const std::string ratio = fixed(speedup, 2) + "x " + baseline;
    if (*r.clears) {
      // (A threshold under 1 can clear a route slower warm: its cold cost is never repaid.)
      const std::string repaid = !coldKnown               ? "no cold figures on this row to charge"
                                 : !r.break_even_calls      ? "not faster: its cold cost is never repaid"
                                 : *r.break_even_calls == 0 ? "ahead from the first call"
                                                            : "its cold cost is repaid after " +
                                                                  fixed(*r.break_even_calls, 0) + " calls";
      r.verdict = "adopt " + r.route + " for " + what + ": " + ratio + " (threshold " + threshold + "); " + repaid;
    } else {
      r.verdict = "keep " + baseline + " for " + what + ": " + r.route + " runs at " + ratio + ", under the threshold " +
                  threshold;
    }
  }
}

std::vector<std::string> verdict_summary(const std::vector<Row>& rows, const std::string& baseline) {
  struct Tally {
    std::vector<std::string> cleared, wrong;
    int shapes = 0, unmatched = 0; // unmatched: verified, but no baseline row to compare with
    double lo = 0, hi = 0; // the speedups' range
  };
  std::vector<std::string> order;
  std::map<std::string, Tally> tally;
  for (const Row& r : rows) {
    if (!r.accept) continue;
    const std::string key = r.route + " for " + r.kernel + " " + r.dtype;
    if (!tally.count(key)) order.push_back(key);
    Tally& t = tally[key];
    ++t.shapes;
    if (r.reference_ok && !*r.reference_ok) t.wrong.push_back(r.shape);
    if (r.clears && *r.clears) t.cleared.push_back(r.shape);
    if (!r.speedup && (!r.reference_ok || *r.reference_ok) && (r.model_ms || r.warm)) ++t.unmatched;
    if (r.speedup) {
      const bool first = t.lo == 0;
      t.lo = first ? *r.speedup : std::min(t.lo, *r.speedup);
      t.hi = first ? *r.speedup : std::max(t.hi, *r.speedup);
    }
  }
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  std::vector<std::string> out;
  const double accept = [&] {
    for (const Row& r : rows)
      if (r.accept) return *r.accept;
    return 0.0;
  }();
  const std::string threshold = fixed(accept, 2) + "x";
  for (const std::string& key : order) {
    const Tally& t = tally[key];
    const int judged = t.shapes - t.unmatched;
    const std::string of = " of " + std::to_string(judged) + " shape" + (judged == 1 ? "" : "s");
    // A route never compared gets no verdict (not "keep the baseline": there may be none).
    const std::string unmatched = t.unmatched == 0 ? ""
                                  : "; " + std::to_string(t.unmatched) + " more without a " + baseline +
                                        " row to compare with";
    const std::string range = t.lo <= 0                          ? ""
                              : fixed(t.lo, 2) == fixed(t.hi, 2) ? " (" + fixed(t.lo, 2) + "x " + baseline + ")"
                                                                 : " (" + fixed(t.lo, 2) + "x to " + fixed(t.hi, 2) + "x " + baseline + ")";
    if (!t.wrong.empty()) {
      out.push_back(key + ": wrong on " + std::to_string(t.wrong.size()) + of + " (" + list(t.wrong) +
                    "): fix it before adopting it anywhere" + unmatched);
    } else if (judged == 0) {
      out.push_back(key + ": no verdict: no verified, timed " + baseline + " row to compare with on any of its " +
                    std::to_string(t.shapes) + " shape" + (t.shapes == 1 ? "" : "s"));
    } else if (int(t.cleared.size()) == judged) {
      out.push_back("adopt " + key + ": it clears " + threshold + " on all" + of + range + unmatched);
    } else if (t.cleared.empty()) {
      out.push_back("keep " + baseline + " (" + key + "): it clears " + threshold + " on none" + of + range + unmatched);
    } else {
      out.push_back(key + ": clears " + threshold + " on " + std::to_string(t.cleared.size()) + of + " (" +
                    list(t.cleared) + "): adopt it there, keep " + baseline + " on the rest" + range + unmatched);
    }
  }
  return out;
}

} // namespace kiln::profile
