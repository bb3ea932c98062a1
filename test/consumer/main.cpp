// Writes its own kernel with the DSL, compiles and runs it through the installed kiln,
// and checks the result with kiln's verifier. Exits non-zero on any failure.
#include <kiln/kiln.hpp>

#include <cmath>
#include <cstdio>

int main() {
  using namespace kiln::dsl;
  try {
    // y = silu(x) * 2, a kernel the catalogue does not have.
    kiln::Kernel k = kernel("scaled_silu", [](Builder& b) {
      auto [M, N] = b.dims("M", "N");
      auto X = b.input("X", {M, N}, f32);
      auto Y = b.output("Y", {M, N}, f32);
      b.grid({cdiv(M, 8), cdiv(N, 32)}, [&](Index i, Index j) {
        b.store(Y.tile({i, j}, {8, 32}), silu(b.load(X.tile({i, j}, {8, 32}))) * 2.0);
      });
    });
    auto rt = kiln::Runtime::create();
    auto ck = rt.compile(k);
    kiln::HostTensor x(kiln::DType::f32, {37, 70}), y(kiln::DType::f32, {37, 70});
    x.fill_random(7);
    y.poison();
    ck.launch({x.view(), y.view()});
    std::vector<double> ref;
    for (double v : x.to_f64()) ref.push_back(2.0 * v / (1.0 + std::exp(-v)));
    auto rep = kiln::verify::compare(y.view(), ref, kiln::verify::Tolerance::for_dtype(kiln::DType::f32));
    std::printf("consumer: %s\n", rep.summary().c_str());
    return rep.ok ? 0 : 1;
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "consumer: kiln error: %s\n", e.what());
    return 1;
  }
}
