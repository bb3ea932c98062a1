#include "kiln/tensor.hpp"

#include <climits>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>

#include "kiln/error.hpp"

namespace kiln {

namespace {

std::string joined(const std::vector<int64_t>& v, const char* sep) {
  std::string s;
  for (size_t k = 0; k < v.size(); ++k) s += (k ? sep : "") + std::to_string(v[k]);
  return s;
}

/// The product of `dims`, or an error naming them where it does not fit in int64: every
/// size kiln computes from a caller's dims goes through here, never a wrapped product.
int64_t checkedProduct(const std::vector<int64_t>& dims, const char* who) {
  int64_t n = 1;
  for (int64_t d : dims)
    if (d == 0) return 0;
  for (int64_t d : dims)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      throw Error(ErrorKind::InvalidArgument, std::string(who) + ": dims [" + joined(dims, "x") +
                                                  "] have more elements than an int64 counts (or a negative dim)");
  return n;
}

/// The kernel's estimate of memory available without swapping (MemAvailable), or the
/// machine's memory where that is unknown; 0 where neither is.
int64_t availableMemoryBytes() {
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    long long kb = 0;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
    std::fclose(f);
    if (kb > 0) return int64_t(kb) * 1024;
  }
  const long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && pageSize > 0 ? int64_t(pages) * pageSize : 0;
}

} // namespace

int64_t TensorView::numel() const { return checkedProduct(dims, "TensorView"); }

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
  std::string st;
  try {
    st = joined(effective_strides(), ",");
  } catch (const Error&) { // row-major strides of dims this large do not fit in int64
    st = "row-major, beyond int64";
  }
  return std::string(to_string(dtype)) + "[" + joined(dims, "x") + "] strides [" + st + "]";
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> st(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;)
    if (__builtin_mul_overflow(st[k], dims[k], &st[k - 1]))
      throw Error(ErrorKind::InvalidArgument,
                  "row_major_strides: dims [" + joined(dims, "x") + "] have strides beyond int64");
  return st;
}

HostTensor::HostTensor(DType dtype, std::vector<int64_t> dims)
    : dtype_(dtype), dims_(std::move(dims)) {
  for (int64_t d : dims_)
    if (d < 0)
      throw Error(ErrorKind::InvalidArgument,
                  "HostTensor: dims must be non-negative, got " + std::to_string(d));
  int64_t bytes = 0;
  if (__builtin_mul_overflow(checkedProduct(dims_, "HostTensor"), int64_t(size_of(dtype_)), &bytes))
    throw Error(ErrorKind::InvalidArgument, "HostTensor: " + std::string(to_string(dtype_)) + "[" +
                                                joined(dims_, "x") + "] is more bytes than an int64 counts");
  // More than the memory available now is refused up front: with overcommit, the
  // allocation would succeed and the first touch of its pages end the process. Asked only
  // for large tensors: /proc is not read for every small one.
  constexpr int64_t kAskAbove = int64_t(256) << 20;
  if (const int64_t avail = bytes > kAskAbove ? availableMemoryBytes() : 0; avail > 0 && bytes > avail)
    throw Error(ErrorKind::Runtime, "HostTensor: " + std::string(to_string(dtype_)) + "[" + joined(dims_, "x") +
                                        "] needs " + std::to_string(bytes) + " bytes, more than the " +
                                        std::to_string(avail) + " bytes of memory available");
  try {
    bytes_.assign(static_cast<size_t>(bytes), 0);
  } catch (const std::bad_alloc&) {
    throw Error(ErrorKind::Runtime, "HostTensor: cannot allocate " + std::to_string(bytes) + " bytes for " +
                                        to_string(dtype_) + "[" + joined(dims_, "x") + "]");
  } catch (const std::length_error&) {
    throw Error(ErrorKind::Runtime, "HostTensor: " + std::to_string(bytes) + " bytes is more than a buffer holds");
  }
}

int64_t HostTensor::numel() const { return checkedProduct(dims_, "HostTensor"); }

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
  if (dtype_ == DType::i32) { // no NaN: the most negative value, never a length or offset
    const int32_t worst = INT32_MIN;
    for (int64_t i = 0; i < n; ++i) std::memcpy(p + 4 * i, &worst, 4);
    return;
  }
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
