// A launch's grid plan (lib/Runtime/GridPlan.h) comes from the compiler or from a kernel
// cache entry: evaluated at every launch, it must refuse what does not fit in int64 and
// stay linear in its size whatever a cache file holds.
#include <catch2/catch.hpp>

#include "Runtime/GridPlan.h"
#include "kiln/error.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <limits>

using kiln::Error;
using kiln::ErrorKind;
using kiln::detail::GridPlan;
using Catch::Matchers::Contains;

namespace {
nlohmann::json node(int kind, int64_t value, const std::string& sym = "", int lhs = -1, int rhs = -1) {
  return nlohmann::json::array({kind, value, sym, lhs, rhs});
}
enum { Const, Sym, Add, Sub, Mul, CeilDiv, FloorDiv, Rem, Min, Max, Div };
} // namespace

TEST_CASE("a grid plan evaluates cdiv of the bound dims", "[grid]") {
  nlohmann::json j = {{"nodes", {node(Sym, 0, "M"), node(Const, 64), node(CeilDiv, 0, "", 0, 1)}}, {"roots", {2}}};
  GridPlan p = GridPlan::fromJson(j);
  CHECK(p.evaluate({{"M", 129}}, "k") == std::array<int64_t, 3>{3, 1, 1});
  CHECK(p.evaluate({{"M", -129}}, "k") == std::array<int64_t, 3>{-2, 1, 1});
  CHECK(p.str() == "(ceildiv(M, 64))");
  CHECK_THROWS_WITH(p.evaluate({}, "k"), Contains("grid needs dim 'M'"));
}

TEST_CASE("a grid size past int64 is refused, never wrapped or trapped", "[grid][errors]") {
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  for (int kind : {Add, Mul, Sub, Div, CeilDiv, FloorDiv, Rem}) {
    INFO("kind " << kind);
    const int64_t rhs = kind == Add || kind == Mul ? hi : kind == Sub ? 2 : -1;
    const int64_t lhs = kind == Add || kind == Mul ? hi : lo;
    nlohmann::json j = {{"nodes", {node(Const, lhs), node(Const, rhs), node(kind, 0, "", 0, 1)}}, {"roots", {2}}};
    CHECK_THROWS_WITH(GridPlan::fromJson(j).evaluate({}, "k"), Contains("kernel 'k': a grid size overflows int64"));
  }
  nlohmann::json byZero = {{"nodes", {node(Const, 1), node(Const, 0), node(Rem, 0, "", 0, 1)}}, {"roots", {2}}};
  CHECK_THROWS_WITH(GridPlan::fromJson(byZero).evaluate({}, "k"), Contains("divides by zero"));
}

TEST_CASE("a cached grid plan that shares operands evaluates in linear time, and prints capped", "[grid][errors]") {
  // 4000 nodes, each the sum of the one before with itself: a tree walk would take 2^4000 steps.
  nlohmann::json nodes = nlohmann::json::array({node(Const, 0)});
  for (int i = 1; i < 4000; ++i) nodes.push_back(node(Add, 0, "", i - 1, i - 1));
  GridPlan p = GridPlan::fromJson({{"nodes", nodes}, {"roots", {3999}}});
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(p.evaluate({}, "k") == std::array<int64_t, 3>{0, 1, 1});
  CHECK(p.str().size() < 1100);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  // Past 4096 nodes, or an operand after its user: not a plan kiln wrote.
  for (int i = 4000; i < 5000; ++i) nodes.push_back(node(Const, 1));
  CHECK_THROWS_WITH(GridPlan::fromJson({{"nodes", nodes}, {"roots", {0}}}), Contains("more than 4096 nodes"));
  nlohmann::json forward = {{"nodes", {node(Add, 0, "", 1, 1), node(Const, 1)}}, {"roots", {0}}};
  CHECK_THROWS_WITH(GridPlan::fromJson(forward), Contains("malformed grid plan") && Contains("bad operand"));
  nlohmann::json fourDims = {{"nodes", {node(Const, 1)}}, {"roots", {0, 0, 0, 0}}};
  CHECK_THROWS_WITH(GridPlan::fromJson(fourDims), Contains("more than 3 grid dims"));
}

TEST_CASE("a grid plan whose numbers are not integers in range is malformed, not cast", "[grid][errors]") {
  // nlohmann's get<int64_t>() casts 1e111 without a check: undefined behaviour (the
  // cache-entry fuzzer found it). Each is refused as a malformed plan instead.
  for (const nlohmann::json& bad : {nlohmann::json(1e111), nlohmann::json(2.5), nlohmann::json(uint64_t(1) << 63),
                                    nlohmann::json("7")}) {
    INFO(bad.dump());
    nlohmann::json j = {{"nodes", {nlohmann::json::array({Const, bad, "", -1, -1})}}, {"roots", {0}}};
    CHECK_THROWS_WITH(GridPlan::fromJson(j), Contains("malformed grid plan"));
  }
  nlohmann::json wideRoot = {{"nodes", {node(Const, 1)}}, {"roots", {int64_t(1) << 40}}};
  CHECK_THROWS_WITH(GridPlan::fromJson(wideRoot), Contains("malformed grid plan") && Contains("not an integer in"));
}
