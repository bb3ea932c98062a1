#pragma once
// GEMM kernels written in the DSL as a user would (not the catalogue's), for the sm_90a
// twin's tests in test_cuda_compile.cpp (no GPU) and test_gpu_kernels.cpp (on the H200).
#include <functional>
#include <string>

#include "kiln/dsl.hpp"

namespace kiln::test {

using Epilogue = std::function<dsl::Tile(const dsl::Tile&)>;

/// C = epilogue(A @ B): A, B bf16; C of `out` (the epilogue's f32 result cast to it);
/// 64x64x32 tiles over a grid that covers C, or only `gridN` column tiles when nonzero.
inline Kernel bf16Gemm(const std::string& name, Epilogue epilogue = {}, DType out = DType::bf16, int64_t gridN = 0) {
  using namespace kiln::dsl;
  return kernel(name, [=](Builder& b) {
    auto [M, N, K] = b.dims("M", "N", "K");
    auto A = b.input("A", {M, K}, bf16), B = b.input("B", {K, N}, bf16);
    auto C = b.output("C", {M, N}, out);
    Index cols = gridN ? b.constant(gridN) : cdiv(N, 64);
    b.grid({cdiv(M, 64), cols}, [&](Index i, Index j) {
      Tile acc = b.loop(cdiv(K, 32), 3, b.zeros({64, 64}), [&](Index kk, const Tile& c) {
        return dot(b.load(A.tile({i, kk}, {64, 32})), b.load(B.tile({kk, j}, {32, 64})), c);
      });
      Tile r = epilogue ? epilogue(acc) : acc;
      b.store(C.tile({i, j}, {64, 64}), out == DType::f32 ? r : cast(r, out));
    });
  });
}

} // namespace kiln::test
