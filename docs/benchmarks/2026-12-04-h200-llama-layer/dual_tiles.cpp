// H200 experiment: the two-product (swiglu) twin's tiles, kiln's choice against each forced.
#include <kiln/kiln.hpp>
#include <cstdio>
int main() {
  const kiln::DType dt = kiln::DType::bf16;
  struct R { const char* name; kiln::RuntimeOptions o; };
  std::vector<R> rts = {{"default", {}}, {"tile_n=256", {.hopper_tile_n = 256}}, {"tile_n=128,m=128", {.hopper_tile_n = 128, .hopper_tile_m = 128}},
                        {"tile_m=64", {.hopper_tile_m = 64}}};
  const kiln::profile::TimingOptions timing{20, 3, true};
  for (auto shape : std::vector<std::vector<int64_t>>{{2048, 14336, 4096}, {8192, 14336, 4096}, {16, 14336, 4096}, {64, 14336, 4096}}) {
    const kiln::catalogue::Entry& e = kiln::catalogue::find("swiglu");
    std::printf("%lldx%lldx%lld:", (long long)shape[0], (long long)shape[1], (long long)shape[2]);
    for (auto& r : rts) {
      kiln::Runtime rt = kiln::Runtime::create(kiln::Backend::cuda, r.o);
      kiln::CompiledKernel k = rt.compile(e.make(dt));
      const int64_t M = shape[0], N = shape[1], K = shape[2];
      kiln::HostTensor x(dt, {M, K}), wg(dt, {K, N}), wu(dt, {K, N});
      x.fill_random(1); wg.fill_random(2, -0.05f, 0.05f); wu.fill_random(3, -0.05f, 0.05f);
      kiln::DeviceTensor dx = rt.upload(x), dg = rt.upload(wg), du = rt.upload(wu), dh = rt.allocate(dt, {M, N});
      const std::vector<kiln::TensorView> views = {dx.view(), dg.view(), du.view(), dh.view()};
      const std::string path = k.launch_path(views);
      k.launch(views);
      bool ok = true;
      if (M <= 64) {
        rt.synchronize();
        kiln::HostTensor h(dt, {M, N});
        rt.download(dh, h);
        ok = kiln::verify::compare(h.view(), kiln::reference::swiglu(x.view(), wg.view(), wu.view()),
                                   kiln::verify::Tolerance::for_dtype(dt)).ok;
      }
      const double us = kiln::profile::time_kernel(rt, k, views, timing).median * 1e3;
      std::printf("  %s %.1fus%s [%s]", r.name, us, ok ? "" : " WRONG", path.substr(0, 60).c_str());
    }
    std::printf("\n");
  }
}
