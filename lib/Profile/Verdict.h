#pragma once
// Internal to lib/Profile: the rule every acceptance threshold is held to.
namespace kiln::profile::detail {
/// Throws kiln::Error(InvalidArgument) unless `accept` is a finite speedup above 0.
void checkThreshold(double accept);
} // namespace kiln::profile::detail
