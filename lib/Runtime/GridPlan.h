#pragma once
// Internal, MLIR-free: how many CTAs a launch needs. A tile.grid's sizes are arith
// expressions of the symbolic dims (cdiv(M, 64), ...); they are read from the tile IR at
// compile time and evaluated on the host at each launch from the bound dims.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "Runtime/Launch.h"

namespace kiln::detail {

struct GridExpr {
  enum Kind { Const, Sym, Add, Sub, Mul, CeilDiv, FloorDiv, Rem, Min, Max, Div } kind = Const;
  int64_t value = 0;  ///< Const
  std::string sym;    ///< Sym
  int lhs = -1, rhs = -1;
};

struct GridPlan {
  std::vector<GridExpr> nodes;
  std::vector<int> roots; ///< one node per grid dim (x, y, z): at most 3
  /// CTAs per grid dim, x y z (1 past the plan's roots); throws kiln::Error(InvalidArgument)
  /// on division by zero or overflow. Allocates nothing for a plan of up to 64 nodes.
  std::array<int64_t, 3> evaluate(const Bindings& b, const std::string& kernel) const;
  std::string str() const; ///< "(ceildiv(M, 64), ceildiv(N, 64))"
  /// For the kernel cache: {"nodes": [[kind, value, sym, lhs, rhs], ...], "roots": [...]}.
  nlohmann::json toJson() const;
  /// Throws kiln::Error(InvalidArgument) when `j` is not a well-formed plan.
  static GridPlan fromJson(const nlohmann::json& j);
};

} // namespace kiln::detail
