#pragma once
// Shared by the GPU suite's files: one CUDA runtime for the whole binary, and shape names.
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/runtime.hpp"

namespace kiln::gputest {

/// The suite's CUDA runtime (main.cpp has checked that one can be made).
inline const Runtime& gpu() {
  static Runtime rt = Runtime::create(Backend::cuda);
  return rt;
}

/// {257, 129, 65} -> "257x129x65"
inline std::string str(const std::vector<int64_t>& s) {
  std::string r;
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "x" : "") + std::to_string(s[i]);
  return r;
}

} // namespace kiln::gputest
