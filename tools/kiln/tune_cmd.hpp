#pragma once
#include <cstdint>
#include <string>

struct TuneOptions {
  std::string kernel, shape, backend = "auto", dtype = "bf16", space, database;
  int reps = 20, warmup = 3, threads = 0;
  uint64_t seed = 1;
  bool replay = true, progress = true;
};

/// Runs `kiln tune`; returns the exit status.
int cmdTune(const TuneOptions& o);
