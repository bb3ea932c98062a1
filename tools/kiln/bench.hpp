#pragma once
#include <cstdint>
#include <string>
#include <vector>

struct BenchOptions {
  std::string kernel, backend = "auto", dtype = "f32";
  std::vector<std::string> shapes;
  int reps = 20, warmup = 3;
  uint64_t seed = 1;
  std::string csv, json, html;
};

/// Runs `kiln bench`; returns the exit status (0: every route verified).
int cmdBench(const BenchOptions& o);
