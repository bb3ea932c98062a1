#include "kiln/tensor.hpp"

#include <cstring>
#include <random>

#include "kiln/error.hpp"

namespace kiln {

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::vector<int64_t> TensorView::effective_strides() const {
  return strides.empty() ? row_major_strides(dims) : strides;
}

int64_t TensorView::offset_of(const std::vector<int64_t>& idx) const {
  if (static_cast<int64_t>(idx.size()) != rank())
    throw Error(ErrorKind::InvalidArgument,
                "TensorView::offset_of: index has " + std::to_string(idx.size()) +
                    " entries but " + describe() + " has rank " + std::to_string(rank()));
  const std::vector<int64_t> st = effective_strides();
  if (st.size() != dims.size())
    throw Error(ErrorKind::InvalidArgument,
                "TensorView::offset_of: strides and dims differ in length in " + describe());
  int64_t off = 0;
  for (size_t k = 0; k < idx.size(); ++k) {
    if (idx[k] < 0 || idx[k] >= dims[k])
      throw Error(ErrorKind::InvalidArgument,
                  "TensorView::offset_of: index " + std::to_string(idx[k]) + " in dim " +
                      std::to_string(k) + " is out of range for " + describe());
    off += idx[k] * st[k];
  }
  return off;
}

std::string TensorView::describe() const {
  auto join = [](const std::vector<int64_t>& v, const char* sep) {
    std::string s;
    for (size_t k = 0; k < v.size(); ++k) {
      if (k) s += sep;
      s += std::to_string(v[k]);
    }
    return s;
  };
  return std::string(to_string(dtype)) + "[" + join(dims, "x") + "] strides [" +
         join(effective_strides(), ",") + "]";
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> st(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;) st[k - 1] = st[k] * dims[k];
  return st;
}

HostTensor::HostTensor(DType dtype, std::vector<int64_t> dims)
    : dtype_(dtype), dims_(std::move(dims)) {
  for (int64_t d : dims_)
    if (d < 0)
      throw Error(ErrorKind::InvalidArgument,
                  "HostTensor: dims must be non-negative, got " + std::to_string(d));
  bytes_.assign(static_cast<size_t>(numel() * size_of(dtype_)), 0);
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

TensorView HostTensor::view() { return TensorView{data(), dtype_, dims_, {}}; }

void HostTensor::fill_random(uint64_t seed, float lo, float hi) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0, n = numel(); i < n; ++i) set(i, dist(gen));
}

void HostTensor::poison() {
  // Written as bits, not via set(NAN), so the pattern does not depend on how the
  // platform spells NAN.
  const int64_t n = numel();
  unsigned char* p = bytes_.data();
  if (dtype_ == DType::f32) {
    const uint32_t qnan = 0x7FC00000u;
    for (int64_t i = 0; i < n; ++i) std::memcpy(p + 4 * i, &qnan, 4);
    return;
  }
  const uint16_t qnan = dtype_ == DType::f16 ? 0x7E00u : 0x7FC0u;
  for (int64_t i = 0; i < n; ++i) std::memcpy(p + 2 * i, &qnan, 2);
}

std::vector<double> HostTensor::to_f64() const {
  std::vector<double> out(static_cast<size_t>(numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = get(static_cast<int64_t>(i));
  return out;
}

} // namespace kiln
