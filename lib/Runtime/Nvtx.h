#pragma once
// Internal: NVTX ranges in kiln's own domain ("kiln"), so Nsight Systems shows a compile's
// phases and each launch by name ("tile passes gemm_bias_relu", "launch softmax") instead of
// anonymous work. No NVTX header here: only Nvtx.cpp includes nvtx3 (header-only, from the
// CUDA toolkit). With no tool attached (the usual case) a range costs a check of one pointer:
// the names are not even built.
#include <string_view>

namespace kiln::detail {

/// A range pushed when made and popped when it ends or is destroyed; next() ends it and
/// pushes the following phase, for phases that run one after another.
class NvtxRange {
public:
  NvtxRange(std::string_view what, std::string_view kernel) { push(what, kernel); }
  ~NvtxRange() { end(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
  void next(std::string_view what) {
    end();
    push(what, kernel_);
  }
  void end();

private:
  void push(std::string_view what, std::string_view kernel);
  std::string_view kernel_; // the caller's string, alive as long as the range
  bool open_ = false;
};

} // namespace kiln::detail
