#include "Runtime/GridPlan.h"

#include <algorithm>

#include "kiln/error.hpp"

namespace kiln::detail {

namespace {

int64_t eval(const GridPlan& p, int n, const Bindings& b, const std::string& kernel) {
  const GridExpr& e = p.nodes.at(n);
  if (e.kind == GridExpr::Const) return e.value;
  if (e.kind == GridExpr::Sym) {
    auto it = b.find(e.sym);
    if (it == b.end())
      throw Error(ErrorKind::InvalidArgument, "kernel '" + kernel + "': grid needs dim '" + e.sym +
                                                  "', which no argument binds");
    return it->second;
  }
  int64_t l = eval(p, e.lhs, b, kernel), r = eval(p, e.rhs, b, kernel);
  auto div = [&](bool ceil) {
    if (r == 0) throw Error(ErrorKind::InvalidArgument, "kernel '" + kernel + "': grid size divides by zero");
    int64_t q = l / r;
    if (ceil && (l % r != 0) && ((l < 0) == (r < 0))) ++q;
    if (!ceil && (l % r != 0) && ((l < 0) != (r < 0))) --q;
    return q;
  };
  switch (e.kind) {
  case GridExpr::Add: return l + r;
  case GridExpr::Sub: return l - r;
  case GridExpr::Mul: return l * r;
  case GridExpr::CeilDiv: return div(true);
  case GridExpr::FloorDiv: return div(false);
  case GridExpr::Rem:
    if (r == 0) throw Error(ErrorKind::InvalidArgument, "kernel '" + kernel + "': grid size divides by zero");
    return l % r;
  case GridExpr::Min: return std::min(l, r);
  case GridExpr::Max: return std::max(l, r);
  case GridExpr::Div:
    if (r == 0) throw Error(ErrorKind::InvalidArgument, "kernel '" + kernel + "': grid size divides by zero");
    return l / r; // truncating, like arith.divsi
  default: return 0;
  }
}

std::string show(const GridPlan& p, int n) {
  const GridExpr& e = p.nodes.at(n);
  static const char* names[] = {"", "", "add", "sub", "mul", "ceildiv", "floordiv", "rem", "min", "max", "div"};
  if (e.kind == GridExpr::Const) return std::to_string(e.value);
  if (e.kind == GridExpr::Sym) return e.sym;
  return std::string(names[e.kind]) + "(" + show(p, e.lhs) + ", " + show(p, e.rhs) + ")";
}

} // namespace

std::vector<int64_t> GridPlan::evaluate(const Bindings& b, const std::string& kernel) const {
  std::vector<int64_t> out;
  for (int r : roots) out.push_back(eval(*this, r, b, kernel));
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
    for (const auto& n : j.at("nodes")) {
      GridExpr e;
      int kind = n.at(0).get<int>();
      if (kind < GridExpr::Const || kind > GridExpr::Div) throw std::out_of_range("bad kind");
      e.kind = GridExpr::Kind(kind);
      e.value = n.at(1).get<int64_t>();
      e.sym = n.at(2).get<std::string>();
      e.lhs = n.at(3).get<int>();
      e.rhs = n.at(4).get<int>();
      p.nodes.push_back(e);
    }
    p.roots = j.at("roots").get<std::vector<int>>();
    const int n = int(p.nodes.size());
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
