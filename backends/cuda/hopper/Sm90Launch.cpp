#include "hopper/Sm90Launch.h"

#include "Driver.h"

#include <algorithm>
#include <cstdint>

namespace kiln::hopper {

namespace {

/// C's tiles: the product of the plan's grid dims (each under 2^31, checked by applies()).
int64_t tileCount(const LaunchPlan& plan, const std::vector<TensorView>& args) {
  int64_t n = 1;
  for (const GridDim& g : plan.gridDims) n *= (args[size_t(g.arg)].dims[size_t(g.dim)] + g.tile - 1) / g.tile;
  return n;
}

/// A 2-D row-major tensor TMA can read: contiguous rows, 16-byte aligned base and pitch.
bool tmaReadable(const TensorView& v, std::string* why, const std::string& who) {
  if (v.rank() != 2 || size_of(v.dtype) != 2) return *why = who + " is not a 2-D 16-bit tensor", false;
  auto st = v.effective_strides();
  auto addr = reinterpret_cast<uintptr_t>(v.data);
  const int64_t e = size_of(v.dtype);
  if (st[1] != 1) return *why = who + "'s rows are not contiguous", false;
  if (st[0] < v.dims[1]) return *why = who + "'s rows overlap (row stride below the row length)", false;
  if (addr % 16 != 0) return *why = who + "'s address is not 16-byte aligned", false;
  if ((st[0] * e) % 16 != 0) return *why = who + "'s row pitch is not a multiple of 16 bytes", false;
  if (v.dims[0] < 1 || v.dims[1] < 1) return *why = who + " is empty", false;
  if (v.dims[0] > INT32_MAX || v.dims[1] > INT32_MAX || st[0] * e >= (int64_t(1) << 40))
    return *why = who + " is larger than a tensor map holds", false;
  return true;
}

} // namespace

bool applies(const LaunchPlan& plan, const std::vector<TensorView>& args, std::string* why) {
  // Every argument and dim the plan names must exist: a plan comes from the compiler or a
  // cache entry, and a wrong one is refused here rather than read out of bounds.
  bool hasPointer = false;
  for (const LaunchParam& p : plan.params) {
    if (p.arg < 0 || size_t(p.arg) >= args.size()) return *why = "the launch plan names a missing argument", false;
    if ((p.kind == LaunchParam::Stride || p.kind == LaunchParam::Dim) && p.dim >= args[size_t(p.arg)].rank())
      return *why = "the launch plan names a missing dim", false;
    hasPointer |= p.kind == LaunchParam::Pointer;
  }
  for (const GridDim& g : plan.gridDims)
    if (g.arg < 0 || size_t(g.arg) >= args.size() || g.dim < 0 || g.dim >= args[size_t(g.arg)].rank())
      return *why = "the launch plan's grid names a missing argument or dim", false;
  if (!hasPointer) return *why = "the launch plan has no output pointer", false;
  for (const LaunchParam& p : plan.params) {
    const TensorView& v = args[size_t(p.arg)];
    const std::string who = "argument " + std::to_string(p.arg);
    if (p.kind == LaunchParam::TensorMap && !tmaReadable(v, why, who)) return false;
    if (p.kind == LaunchParam::Dim && (v.dims[size_t(p.dim)] < 1 || v.dims[size_t(p.dim)] > INT32_MAX))
      return *why = who + "'s dim " + std::to_string(p.dim) + " is 0 or over 2^31", false;
  }
  // C (the first Pointer) takes element pairs in one 4-byte store when its type is 16-bit.
  for (const LaunchParam& p : plan.params)
    if (p.kind == LaunchParam::Pointer) {
      const TensorView& c = args[size_t(p.arg)];
      auto st = c.effective_strides();
      if (st.back() != 1) return *why = "C's rows are not contiguous", false;
      if (size_of(c.dtype) == 2 && (reinterpret_cast<uintptr_t>(c.data) % 4 != 0 || st[0] % 2 != 0))
        return *why = "C's element pairs are not 4-byte aligned", false;
      break;
    }
  // The kernel numbers tiles in 32 bits, and its persistent loop steps past the last one.
  if (tileCount(plan, args) > INT32_MAX - (int64_t(1) << 20)) return *why = "C has more than 2^31 tiles", false;
  return true;
}

void launch(CUfunction f, const LaunchPlan& plan, const std::vector<TensorView>& args, CUstream stream,
            const std::string& kernelName, int smCount) {
  // Parameter storage: reserved up front, so the addresses handed to the driver stay put.
  const size_t n = plan.params.size();
  std::vector<CUtensorMap> maps;
  std::vector<CUdeviceptr> ptrs;
  std::vector<int64_t> i64s;
  std::vector<int32_t> i32s;
  maps.reserve(n), ptrs.reserve(n), i64s.reserve(n), i32s.reserve(n);
  std::vector<void*> params;
  for (const LaunchParam& p : plan.params) {
    const TensorView& v = args[size_t(p.arg)];
    auto st = v.effective_strides();
    switch (p.kind) {
    case LaunchParam::TensorMap: {
      const int64_t e = size_of(v.dtype);
      cuuint64_t dims[2] = {cuuint64_t(v.dims[1]), cuuint64_t(v.dims[0])}; // innermost first
      cuuint64_t pitch[1] = {cuuint64_t(st[0] * e)};
      cuuint32_t box[2] = {cuuint32_t(p.box[0]), cuuint32_t(p.box[1])};
      cuuint32_t unit[2] = {1, 1};
      maps.emplace_back();
      auto type = v.dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
      KILN_CU_CHECK_CTX(cuda::driver().cuTensorMapEncodeTiled(&maps.back(), type, 2, v.data, dims, pitch, box, unit,
                                                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                        "kernel '" + kernelName + "': encoding the tensor map of argument " + std::to_string(p.arg) +
                            " (" + v.describe() + ")");
      params.push_back(&maps.back());
      break;
    }
    case LaunchParam::Pointer:
      ptrs.push_back(reinterpret_cast<CUdeviceptr>(v.data));
      params.push_back(&ptrs.back());
      break;
    case LaunchParam::Stride:
      i64s.push_back(st[size_t(p.dim)]);
      params.push_back(&i64s.back());
      break;
    case LaunchParam::Dim:
      i32s.push_back(int32_t(v.dims[size_t(p.dim)]));
      params.push_back(&i32s.back());
      break;
    }
  }
  int64_t ctas = tileCount(plan, args);
  if (plan.persistent && smCount > 0) ctas = std::min<int64_t>(ctas, int64_t(smCount) * plan.ctasPerSm);
  std::array<unsigned, 3> grid = {unsigned(ctas), 1, 1};
  cuda::launchKernel(f, kernelName, grid, {unsigned(plan.threads), 1, 1}, unsigned(plan.sharedBytes), stream, params.data());
}

} // namespace kiln::hopper
