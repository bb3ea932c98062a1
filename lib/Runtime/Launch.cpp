#include "Runtime/Launch.h"

#include "kiln/error.hpp"

#include <algorithm>

namespace kiln::detail {

namespace {
[[noreturn]] void bad(const KernelSignature& sig, const std::string& msg) {
  throw Error(ErrorKind::InvalidArgument, "kernel '" + sig.name + "': " + msg);
}

/// The bytes [first, last] a view's elements lie in (empty: none), from checkLaunchArgs's
/// overflow-checked span.
struct Range {
  uintptr_t first = 0, last = 0;
  bool empty = true;
};

/// Whether two different indices of `v` can name the same element: the dims, by increasing
/// stride, must each step past everything the smaller ones reach (sufficient, and what
/// every row-major, column-major or padded layout satisfies).
bool overlapsItself(const TensorView& v) {
  const StridesOf st(v);
  size_t inlineOrder[8];
  std::vector<size_t> heapOrder(v.dims.size() > 8 ? v.dims.size() : 0);
  size_t* order = heapOrder.empty() ? inlineOrder : heapOrder.data();
  size_t n = 0;
  for (size_t d = 0; d < v.dims.size(); ++d)
    if (v.dims[d] > 1) order[n++] = d;
  std::sort(order, order + n, [&](size_t a, size_t b) { return st[a] < st[b]; });
  int64_t reach = 0; // the largest offset the dims so far reach
  for (size_t k = 0; k < n; ++k) {
    const size_t d = order[k];
    if (st[d] <= reach) return true;
    reach += (v.dims[d] - 1) * st[d];
  }
  return false;
}

/// "argument 'A' dim 1": where `symbol` is first bound in `sig` (checkLaunchArgs binds the
/// first use it meets, in this order).
std::string firstUse(const KernelSignature& sig, const std::string& symbol) {
  for (const ArgSpec& spec : sig.args)
    for (size_t d = 0; d < spec.dims.size(); ++d)
      if (spec.dims[d].is_symbol() && spec.dims[d].symbol == symbol)
        return "argument '" + spec.name + "' dim " + std::to_string(d);
  return "?";
}

bool sameView(const TensorView& a, const TensorView& b) {
  return a.data == b.data && a.dtype == b.dtype && a.dims == b.dims && a.effective_strides() == b.effective_strides();
}

/// An output must own its memory: its elements distinct, and apart from every other
/// argument's, except the very same view of an input the kernel declared it may be written
/// in place over (dsl::Builder::allow_in_place; never an input a contraction reads).
void checkOutputsApart(const KernelSignature& sig, const std::vector<TensorView>& args,
                       const InlineArray<Range, kInlineArgs>& ranges) {
  for (size_t o = 0; o < args.size(); ++o) {
    if (!sig.args[o].output) continue;
    const Range& ro = ranges[o];
    if (ro.empty) continue;
    const auto out = [&] { return "output '" + sig.args[o].name + "'"; }; // for a message only
    if (overlapsItself(args[o]))
      bad(sig, out() + " overlaps itself (" + args[o].describe() + "): its strides give different elements the same memory");
    for (size_t i = 0; i < args.size(); ++i) {
      const Range& ri = ranges[i];
      if (i == o || ri.empty || ri.last < ro.first || ro.last < ri.first) continue;
      const ArgSpec& other = sig.args[i];
      const auto& allowed = sig.args[o].in_place_over;
      const bool declared = !other.output && std::find(allowed.begin(), allowed.end(), other.name) != allowed.end();
      const bool same = sameView(args[i], args[o]);
      if (declared && same) continue; // in place, as the kernel allows
      const std::string them = (other.output ? "output '" : "input '") + other.name + "'";
      bad(sig, out() + " overlaps " + them + " in memory (" + args[o].describe() + " at " +
                   std::to_string(ro.first) + " against " + args[i].describe() + " at " + std::to_string(ri.first) +
                   "): " +
                   (other.contracted ? "a contraction reads " + them + " while " + out() + " is written"
                    : declared       ? "only the very same view of an input may be written in place"
                    : other.output   ? "two outputs may not share memory"
                                     : "the kernel does not declare that " + out() + " may be written in place over " +
                                         them + " (dsl::Builder::allow_in_place)"));
    }
  }
}
} // namespace

std::optional<int64_t> spanBytes(const TensorView& v) {
  int64_t count = 1, last = 0, bytes = 0;
  bool overflow = false;
  for (int64_t extent : v.dims) {
    if (extent == 0) return 0;
    overflow = overflow || __builtin_mul_overflow(count, extent, &count);
  }
  if (!overflow && !v.strides.empty() && v.strides.size() == v.dims.size())
    for (size_t d = 0; d < v.dims.size() && !overflow; ++d) {
      int64_t step = 0;
      overflow = __builtin_mul_overflow(v.dims[d] - 1, v.strides[d], &step) || __builtin_add_overflow(last, step, &last);
    }
  else last = count - 1;
  if (!overflow) overflow = __builtin_mul_overflow(last + 1, int64_t(size_of(v.dtype)), &bytes);
  if (overflow) return std::nullopt;
  return bytes;
}

Bindings checkLaunchArgs(const KernelSignature& sig, const std::vector<TensorView>& args, Spans* spans) {
  if (args.size() != sig.args.size())
    bad(sig, "expects " + std::to_string(sig.args.size()) + " arguments (" + sig.str() +
                 "), got " + std::to_string(args.size()));
  // Every launch runs this: the names in messages are made only when one is thrown.
  Bindings bound;
  if (spans && spans->size() != args.size())
    throw Error(ErrorKind::Runtime, "kernel '" + sig.name + "': checkLaunchArgs was given room for " +
                                        std::to_string(spans->size()) + " spans, not " + std::to_string(args.size()));
  InlineArray<Range, kInlineArgs> ranges(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgSpec& spec = sig.args[i];
    const TensorView& v = args[i];
    const auto who = [&] { return "argument '" + spec.name + "'"; };
    if (v.rank() != static_cast<int64_t>(spec.dims.size()))
      bad(sig, who() + " must have rank " + std::to_string(spec.dims.size()) + " (" +
                   spec.str() + "), got rank " + std::to_string(v.rank()));
    if (v.dtype != spec.dtype)
      bad(sig, who() + " must be " + to_string(spec.dtype) + ", got " + to_string(v.dtype));
    if (!v.strides.empty() && v.strides.size() != v.dims.size())
      bad(sig, who() + " has " + std::to_string(v.strides.size()) + " strides for " +
                   std::to_string(v.dims.size()) + " dims");
    for (size_t d = 0; d < v.dims.size(); ++d)
      if (v.dims[d] < 0) bad(sig, who() + " dim " + std::to_string(d) + " is negative (" + std::to_string(v.dims[d]) + ")");
    // Every size and offset the kernel computes from this view, in elements and in bytes,
    // fits in int64: the element count, and the span from the first element to the last.
    const bool empty = std::find(v.dims.begin(), v.dims.end(), 0) != v.dims.end();
    const std::optional<int64_t> span = spanBytes(v);
    if (!span)
      bad(sig, who() + " (" + v.describe() + ") spans more bytes than an int64 counts: its dims or strides are too large");
    const int64_t bytes = *span;
    if (spans) (*spans)[i] = bytes;
    if (!empty) {
      const auto first = reinterpret_cast<uintptr_t>(v.data);
      ranges[i] = {first, first + uintptr_t(bytes) - 1, false};
    }
    const StridesOf strides(v);
    for (size_t d = 0; d < spec.dims.size(); ++d) {
      const auto where = [&, d] { return who() + " dim " + std::to_string(d); };
      int64_t extent = v.dims[d];
      const DimSpec& ds = spec.dims[d];
      if (!ds.is_symbol() && extent != ds.extent)
        bad(sig, where() + " must be " + std::to_string(ds.extent) + ", got " +
                     std::to_string(extent));
      if (ds.is_symbol()) {
        const auto [value, fresh] = bound.bind(ds.symbol, extent);
        if (!fresh && value != extent)
          bad(sig, where() + " is " + std::to_string(extent) + " but " + ds.symbol + " = " +
                       std::to_string(value) + " (from " + firstUse(sig, ds.symbol) + ")");
      }
      if (!empty && (strides[d] < 0 || (strides[d] == 0 && extent > 1)))
        bad(sig, where() + " has stride " + std::to_string(strides[d]) +
                     ": strides must be positive (0 only for a dim of extent 1)");
    }
    if (v.data == nullptr && !empty) bad(sig, who() + " has null data");
  }
  checkOutputsApart(sig, args, ranges);
  return bound;
}

StridesOf::StridesOf(const TensorView& v) {
  const size_t rank = v.dims.size();
  if (!v.strides.empty()) {
    data_ = v.strides.data();
    return;
  }
  int64_t* out = rank <= kInline ? inline_ : (heap_.resize(rank), heap_.data());
  int64_t s = 1;
  for (size_t d = rank; d-- > 0;) {
    out[d] = s;
    if (d > 0 && __builtin_mul_overflow(s, v.dims[d], &s)) { // effective_strides() says so
      heap_ = v.effective_strides();
      out = heap_.data();
      break;
    }
  }
  data_ = out;
}

namespace {
size_t memrefWords(const std::vector<TensorView>& args) {
  size_t n = 0;
  for (const TensorView& a : args) n += 3 + 2 * a.dims.size();
  return n;
}
} // namespace

PackedArgs::PackedArgs(const std::vector<TensorView>& args) : words(memrefWords(args)), ptrs(words.size()) {
  size_t k = 0;
  for (const TensorView& a : args) {
    auto ptr = static_cast<int64_t>(reinterpret_cast<intptr_t>(a.data));
    words[k++] = ptr;
    words[k++] = ptr;
    words[k++] = 0;
    for (int64_t d : a.dims) words[k++] = d;
    const StridesOf strides(a);
    for (size_t d = 0; d < a.dims.size(); ++d) words[k++] = strides[d];
  }
  for (size_t w = 0; w < words.size(); ++w) ptrs[w] = &words[w];
}

} // namespace kiln::detail
