#include "kiln/verify.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kiln/error.hpp"

namespace kiln::verify {

Tolerance Tolerance::for_dtype(DType t) {
  // Rounding an output to bf16 moves an element by up to 2^-8 of itself, so a 5% of the
  // peak bound never trips on rounding but does on a wrong fragment or row.
  if (t == DType::i32) return Tolerance{0, 0};
  return t == DType::f32 ? Tolerance{1e-5, 1e-4} : Tolerance{1e-2, 5e-2};
}

namespace {

std::string fmt(const char* spec, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, v);
  return buf;
}

// Element offsets of `v` in row-major index order, however it is strided.
std::vector<int64_t> row_major_offsets(const TensorView& v) {
  const std::vector<int64_t> st = v.effective_strides();
  if (st.size() != v.dims.size())
    throw Error(ErrorKind::InvalidArgument,
                "verify::compare: out strides and dims differ in length in " + v.describe());
  const int64_t n = v.numel();
  std::vector<int64_t> offsets;
  offsets.reserve(static_cast<size_t>(n > 0 ? n : 0));
  std::vector<int64_t> idx(v.dims.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    offsets.push_back(off);
    // Odometer step: bump the last dim, carrying into earlier ones.
    for (size_t k = idx.size(); k-- > 0;) {
      off += st[k];
      if (++idx[k] < v.dims[k]) break;
      off -= st[k] * idx[k];
      idx[k] = 0;
    }
  }
  return offsets;
}

} // namespace

Report compare(const TensorView& out, const std::vector<double>& ref, Tolerance tol) {
  Report r;
  r.tolerance = tol;
  r.numel = out.numel();
  if (static_cast<int64_t>(ref.size()) != r.numel) {
    // Nothing comparable: NaN rel_l2 with no worst index is how summary() tells this apart.
    r.rel_l2 = std::nan("");
    r.max_abs = std::nan("");
    return r;
  }
  if (r.numel > 0 && out.data == nullptr)
    throw Error(ErrorKind::InvalidArgument, "verify::compare: out " + out.describe() +
                                                " has a null data pointer");

  const std::vector<int64_t> offsets = row_major_offsets(out);
  double diff2 = 0, ref2 = 0;
  bool ref_finite = true;
  for (int64_t i = 0; i < r.numel; ++i) {
    const double o = load_as_f32(out.data, out.dtype, offsets[static_cast<size_t>(i)]);
    const double e = ref[static_cast<size_t>(i)];
    if (!std::isfinite(o)) {
      if (r.nonfinite++ == 0) r.first_nonfinite = i;
      continue;
    }
    if (!std::isfinite(e)) { // a broken reference must not look like a pass
      if (ref_finite) r.worst_index = i;
      ref_finite = false;
      r.max_abs = INFINITY;
      continue;
    }
    const double d = std::fabs(o - e);
    r.peak = std::max(r.peak, std::fabs(e));
    diff2 += d * d;
    ref2 += e * e;
    if (ref_finite && (r.worst_index < 0 || d > r.max_abs)) {
      r.max_abs = d;
      r.worst_index = i;
    }
  }
  const double ref_norm = std::sqrt(ref2);
  r.rel_l2 = !ref_finite        ? std::nan("")
             : ref_norm > 0 ? std::sqrt(diff2) / ref_norm
                            : std::sqrt(diff2);
  r.ok = r.nonfinite == 0 && r.rel_l2 <= tol.rel_l2 &&
         (r.peak == 0 || r.max_abs <= tol.max_abs_of_peak * r.peak);
  return r;
}

std::string Report::summary() const {
  std::string s = (output.empty() ? std::string() : output + ": ") + "reference_ok=" + (ok ? "true" : "false") +
                  " rel_l2=" + fmt("%.3g", rel_l2) + " max_abs=" + fmt("%.3g", max_abs) +
                  " tol=" + fmt("%.3g", tolerance.rel_l2) + " numel=" + std::to_string(numel);
  if (ok) return s;
  if (nonfinite > 0)
    return s + " " + std::to_string(nonfinite) + " non-finite elements (first at flat index " +
           std::to_string(first_nonfinite) + ": never written, or NaN/Inf produced)";
  if (std::isnan(rel_l2) && worst_index < 0)
    return s + " reference size differs from output numel " + std::to_string(numel) +
           " (nothing compared)";
  if (std::isnan(rel_l2))
    return s + " reference is not finite (first at flat index " + std::to_string(worst_index) +
           ")";
  if (rel_l2 <= tolerance.rel_l2)
    return s + " max_abs " + fmt("%.3g", max_abs) + " > " + fmt("%.3g", tolerance.max_abs_of_peak) +
           " x peak |ref| " + fmt("%.3g", peak) + " (worst at flat index " + std::to_string(worst_index) + ")";
  // Report keeps no element values, so the worst element is shown by its |out-ref|.
  return s + " rel_l2 " + fmt("%.3g", rel_l2) + " > tol " + fmt("%.3g", tolerance.rel_l2) +
         " (worst at flat index " + std::to_string(worst_index) + ": |out-ref|=" +
         fmt("%.3g", max_abs) + ")";
}

} // namespace kiln::verify
