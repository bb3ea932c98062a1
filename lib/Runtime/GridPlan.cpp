#include "Runtime/GridPlan.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "Runtime/JsonInt.h"
#include "kiln/error.hpp"

namespace kiln::detail {

namespace {
constexpr size_t kMaxGridNodes = 4096;

// Plans are DAGs (a cached one may share any operand): both walks memoize per node, so
// their cost is linear in the nodes, and text is capped.
constexpr size_t kMaxShown = 512;

std::string show(const GridPlan& p, int n, std::vector<std::string>& memo) {
  if (!memo[size_t(n)].empty()) return memo[size_t(n)];
  const GridExpr& e = p.nodes.at(size_t(n));
  static const char* names[] = {"", "", "add", "sub", "mul", "ceildiv", "floordiv", "rem", "min", "max", "div"};
  std::string out;
  if (e.kind == GridExpr::Const) out = std::to_string(e.value);
  else if (e.kind == GridExpr::Sym) out = e.sym;
  else out = std::string(names[e.kind]) + "(" + show(p, e.lhs, memo) + ", " + show(p, e.rhs, memo) + ")";
  if (out.size() > kMaxShown) out = out.substr(0, kMaxShown) + "...";
  return memo[size_t(n)] = out;
}
std::string show(const GridPlan& p, int n) {
  std::vector<std::string> memo(p.nodes.size());
  return show(p, n, memo);
}

int64_t eval(const GridPlan& p, int n, const Bindings& b, const std::string& kernel, std::optional<int64_t>* memo) {
  if (memo[size_t(n)]) return *memo[size_t(n)];
  const GridExpr& e = p.nodes.at(size_t(n));
  if (e.kind == GridExpr::Const) return *(memo[size_t(n)] = e.value);
  if (e.kind == GridExpr::Sym) {
    const std::optional<int64_t> bound = b.find(e.sym);
    if (!bound)
      throw Error(ErrorKind::InvalidArgument, "kernel '" + kernel + "': grid needs dim '" + e.sym +
                                                  "', which no argument binds");
    return *(memo[size_t(n)] = *bound);
  }
  const int64_t l = eval(p, e.lhs, b, kernel, memo), r = eval(p, e.rhs, b, kernel, memo);
  // Every step is checked: a grid that does not fit in int64 is refused, never wrapped
  // (INT64_MIN / -1 would even trap).
  auto overflow = [&]() -> int64_t {
    throw Error(ErrorKind::InvalidArgument, "kernel '" + kernel + "': a grid size overflows int64 (" + show(p, n) + ")");
  };
  auto zero = [&]() -> int64_t {
    throw Error(ErrorKind::InvalidArgument, "kernel '" + kernel + "': grid size divides by zero");
  };
  const bool divides = e.kind == GridExpr::CeilDiv || e.kind == GridExpr::FloorDiv || e.kind == GridExpr::Rem ||
                       e.kind == GridExpr::Div;
  if (divides && r == 0) zero();
  if (divides && r == -1 && l == std::numeric_limits<int64_t>::min()) overflow();
  int64_t out = 0;
  switch (e.kind) {
  case GridExpr::Add: out = __builtin_add_overflow(l, r, &out) ? overflow() : out; break;
  case GridExpr::Sub: out = __builtin_sub_overflow(l, r, &out) ? overflow() : out; break;
  case GridExpr::Mul: out = __builtin_mul_overflow(l, r, &out) ? overflow() : out; break;
  case GridExpr::CeilDiv:
    out = l / r + ((l % r != 0) && ((l < 0) == (r < 0)) ? 1 : 0);
    break;
  case GridExpr::FloorDiv:
    out = l / r - ((l % r != 0) && ((l < 0) != (r < 0)) ? 1 : 0);
    break;
  case GridExpr::Rem: out = l % r; break;
  case GridExpr::Min: out = std::min(l, r); break;
  case GridExpr::Max: out = std::max(l, r); break;
  case GridExpr::Div: out = l / r; break; // truncating, like arith.divsi
  default: out = 0;
  }
  return *(memo[size_t(n)] = out);
}

} // namespace

std::array<int64_t, 3> GridPlan::evaluate(const Bindings& b, const std::string& kernel) const {
  if (roots.size() > 3)
    throw Error(ErrorKind::InvalidArgument, "kernel '" + kernel + "': a grid of " + std::to_string(roots.size()) +
                                                " dims; CUDA's has at most 3");
  InlineArray<std::optional<int64_t>, 64> memo(nodes.size());
  std::array<int64_t, 3> out = {1, 1, 1};
  for (size_t d = 0; d < roots.size(); ++d) out[d] = eval(*this, roots[d], b, kernel, memo.data());
  return out;
}

nlohmann::json GridPlan::toJson() const {
  nlohmann::json nodesJ = nlohmann::json::array();
  for (const GridExpr& e : nodes) nodesJ.push_back({int(e.kind), e.value, e.sym, e.lhs, e.rhs});
  return {{"nodes", nodesJ}, {"roots", roots}};
}

GridPlan GridPlan::fromJson(const nlohmann::json& j) {
  GridPlan p;
  try {
    // A compiled grid has a handful of nodes; evaluation recurses once per level.
    if (j.at("nodes").size() > kMaxGridNodes) throw std::out_of_range("more than 4096 nodes");
    for (const auto& n : j.at("nodes")) {
      GridExpr e;
      int kind = detail::jsonInt<int>(n.at(0));
      if (kind < GridExpr::Const || kind > GridExpr::Div) throw std::out_of_range("bad kind");
      e.kind = GridExpr::Kind(kind);
      e.value = detail::jsonInt<int64_t>(n.at(1));
      e.sym = n.at(2).get<std::string>();
      e.lhs = detail::jsonInt<int>(n.at(3));
      e.rhs = detail::jsonInt<int>(n.at(4));
      p.nodes.push_back(e);
    }
    p.roots = detail::jsonInts<int>(j.at("roots"));
    const int n = int(p.nodes.size());
    if (p.roots.size() > 3) throw std::out_of_range("more than 3 grid dims");
    for (int r : p.roots)
      if (r < 0 || r >= n) throw std::out_of_range("bad root");
    for (int i = 0; i < n; ++i) { // operands come before their users: no cycles
      const GridExpr& e = p.nodes[size_t(i)];
      if (e.kind > GridExpr::Sym && (e.lhs < 0 || e.lhs >= i || e.rhs < 0 || e.rhs >= i))
        throw std::out_of_range("bad operand");
    }
  } catch (const std::exception& e) {
    throw Error(ErrorKind::InvalidArgument, std::string("malformed grid plan in a kernel cache entry: ") + e.what());
  }
  return p;
}

std::string GridPlan::str() const {
  std::string s = "(";
  for (size_t i = 0; i < roots.size(); ++i) s += (i ? ", " : "") + show(*this, roots[i]);
  return s + ")";
}

} // namespace kiln::detail
