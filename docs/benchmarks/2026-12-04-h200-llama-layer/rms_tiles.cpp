#include <kiln/kiln.hpp>
#include <cstdio>
int main() {
  kiln::Runtime rt = kiln::Runtime::create(kiln::Backend::cuda);
  const kiln::DType dt = kiln::DType::bf16;
  const kiln::profile::TimingOptions timing{30, 5, true};
  struct T { int64_t r, c; };
  const T tiles[] = {{4, 256}, {1, 256}, {1, 512}, {1, 1024}, {1, 2048}, {1, 4096}, {2, 1024}, {2, 2048}, {4, 1024}, {8, 512}};
  for (int64_t M : {1, 16, 64, 2048, 8192}) {
    const int64_t N = 4096;
    kiln::HostTensor x(dt, {M, N}), w(dt, {N});
    x.fill_random(1); w.fill_random(2, 0.8f, 1.2f);
    kiln::DeviceTensor dx = rt.upload(x), dw = rt.upload(w), dy = rt.allocate(dt, {M, N});
    const std::vector<double> want = kiln::reference::rmsnorm(x.view(), w.view(), 1e-6);
    std::printf("M=%lld N=%lld:", (long long)M, (long long)N);
    for (const T& t : tiles) {
      kiln::CompiledKernel k = rt.compile(kiln::catalogue::rmsnorm(dt, 1e-6, {t.r, t.c}));
      k.launch({dx.view(), dw.view(), dy.view()});
      rt.synchronize();
      kiln::HostTensor got(dt, {M, N});
      rt.download(dy, got);
      const bool ok = kiln::verify::compare(got.view(), want, kiln::verify::Tolerance::for_dtype(dt)).ok;
      const double us = kiln::profile::time_kernel(rt, k, {dx.view(), dw.view(), dy.view()}, timing).median * 1e3;
      std::printf("  %lldx%lld %.1fus%s", (long long)t.r, (long long)t.c, us, ok ? "" : "(WRONG)");
    }
    std::printf("\n");
  }
}
