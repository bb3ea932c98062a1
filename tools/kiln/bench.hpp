#pragma once
#include <cstdint>
#include <string>
#include <vector>

struct BenchOptions {
  std::string kernel, backend = "auto", dtype = "f32";
  std::vector<std::string> shapes;
  std::string shapes_file;        ///< one shape per line; '#' starts a comment
  std::vector<std::string> routes; ///< empty: every route this machine can run
  int reps = 20, warmup = 3;
  uint64_t seed = 1;
  bool progress = true;
  std::string csv, json, html;
  std::string tuned_db; ///< adds the kiln-tuned route: per shape, the tuner's choice (searched or replayed)
  /// The acceptance threshold (a speedup over the framework route, eigen on the CPU): each
  /// other route gets a verdict. 0: none asked for.
  double accept = 0;
};

/// Runs `kiln bench`; returns the exit status (0: every route verified).
int cmdBench(const BenchOptions& o);

/// The shapes of a shapes file: one per line, blank lines and '#' comments skipped.
/// Throws kiln::Error(NotFound) when the file cannot be read.
std::vector<std::string> readShapesFile(const std::string& path);
namespace kiln::profile { struct Row; }
/// Judges `rows` against `baseline` at `accept` and prints the verdicts: per shape, then per
/// route and kernel across its shapes.
void judgeAndPrint(std::vector<kiln::profile::Row>& rows, double accept, const std::string& baseline);
/// Writes a report file (nothing for an empty path) and says so, only once every byte is out.
void writeReport(const std::string& path, const std::string& text);
