// C = relu(A @ B + bias), bf16 in and out, f32 accumulate, written out in the DSL.
// Tile sizes are C++ values; M, N, K are runtime values: one compile serves every shape.
#include "example.hpp"

using namespace kiln::dsl;

struct Tiles { int64_t m = 64, n = 64, k = 32, stages = 3; };

kiln::Kernel gemm_bias_relu(Tiles t = {}) {
  return kernel("gemm_bias_relu", [=](Builder& k) {
    auto [M, N, K] = k.dims("M", "N", "K");
    auto A = k.input("A", {M, K}, bf16), B = k.input("B", {K, N}, bf16);
    auto bias = k.input("bias", {N}, bf16);
    auto C = k.output("C", {M, N}, bf16);
    k.grid({cdiv(M, t.m), cdiv(N, t.n)}, [&](Index i, Index j) {
      Tile acc = k.loop(cdiv(K, t.k), t.stages, k.zeros({t.m, t.n}), [&](Index kk, const Tile& c) {
        return dot(k.load(A.tile({i, kk}, {t.m, t.k})), k.load(B.tile({kk, j}, {t.k, t.n})), c);
      });
      Tile b = cast(k.load(bias.tile({j}, {t.n})), f32);
      k.store(C.tile({i, j}, {t.m, t.n}), cast(relu(acc + rows(b)), bf16));
    });
  });
}

int main() {
  kiln::Kernel k = gemm_bias_relu();
  std::printf("%s", k.tile_ir().c_str());
  return example::run(k, "gemm_bias_relu", {257, 129, 65}, kiln::DType::bf16);
}
