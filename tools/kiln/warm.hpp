#pragma once
#include <string>

/// Runs `kiln warm MANIFEST`: compiles the manifest's kernels into the disk cache, for GPU
/// machines, on a machine without a GPU. Returns the exit status.
int cmdWarm(const std::string& manifest, const std::string& dir, int threads);
