#pragma once
// Every elementwise math op of the DSL as a one-op kernel Y = op(X) over a 1-D tensor, so
// the CPU and CUDA backends can be held to the same scalar math (lib/Transforms/ScalarMath).
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/dsl.hpp"

namespace kiln::test {

using UnaryFn = std::function<dsl::Tile(const dsl::Tile&)>;

inline const std::vector<std::pair<std::string, UnaryFn>>& unaryOps() {
  using namespace kiln::dsl;
  static const std::vector<std::pair<std::string, UnaryFn>> ops = {
      {"exp", [](const Tile& t) { return exp(t); }},       {"exp2", [](const Tile& t) { return exp2(t); }},
      {"log", [](const Tile& t) { return log(t); }},       {"sqrt", [](const Tile& t) { return sqrt(t); }},
      {"rsqrt", [](const Tile& t) { return rsqrt(t); }},   {"tanh", [](const Tile& t) { return tanh(t); }},
      {"sigmoid", [](const Tile& t) { return sigmoid(t); }}, {"relu", [](const Tile& t) { return relu(t); }},
      {"gelu", [](const Tile& t) { return gelu(t); }},     {"silu", [](const Tile& t) { return silu(t); }},
      {"neg", [](const Tile& t) { return -t; }},
  };
  return ops;
}

/// Y = op(X), X and Y of N f32 elements.
inline Kernel unaryKernel(const std::string& name, const UnaryFn& op) {
  using namespace kiln::dsl;
  return kernel("unary_" + name, [&](Builder& b) {
    auto [N] = b.dims("N");
    auto X = b.input("X", {N}, f32);
    auto Y = b.output("Y", {N}, f32);
    b.grid({cdiv(N, 256)}, [&](Index i) { b.store(Y.tile({i}, {256}), op(b.load(X.tile({i}, {256})))); });
  });
}

} // namespace kiln::test
