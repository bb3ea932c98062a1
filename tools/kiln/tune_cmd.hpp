#pragma once
#include <cstdint>
#include <string>

struct TuneOptions {
  std::string kernel, shape, backend = "auto", dtype = "bf16", space, database;
  int reps = 20, warmup = 3, threads = 0;
  uint64_t seed = 1;
  bool replay = true, progress = true;
};

#include <vector>

#include "kiln/catalogue.hpp"
#include "kiln/runtime.hpp"
#include "kiln/tune.hpp"

/// Runs `kiln tune`; returns the exit status.
int cmdTune(const TuneOptions& o);

/// The built-in GEMM tile space for `backend` (docs/tuning.md), constraints applied.
/// kiln tune's default search space for `rt`'s backend and target (docs/tuning.md).
kiln::tune::Space defaultTuneSpace(const kiln::Runtime& rt, kiln::DType dt);
/// The catalogue GEMM of `kernel` with a config's tiles.
kiln::Kernel tiledKernel(const std::string& kernel, kiln::DType dt, const kiln::tune::Config& c);
/// Whether `entry` on `shape` is verified against cuBLASLt on the GPU (entry.gpu_problem)
/// rather than Eigen in f64 on the host: a GEMM over 2^33 multiply-adds (8192^3: minutes on
/// the host) on the CUDA backend. kiln bench and kiln tune decide alike.
bool gpuReference(const kiln::catalogue::Entry& entry, kiln::Backend backend, const std::vector<int64_t>& shape);
/// `entry`'s problem on `shape` with the reference gpuReference() picks (on `rt`'s GPU or the host).
kiln::catalogue::Problem referenceProblem(const kiln::catalogue::Entry& entry, const kiln::Runtime& rt,
                                          const std::vector<int64_t>& shape, kiln::DType dt, uint64_t seed);
