#include "eigen_route.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>

#include <vector>

#include "kiln/error.hpp"
#include "kiln/profile.hpp"

namespace {

struct Module {
  std::string isa, error;
  const char* (*isaName)() = nullptr;
  void* (*create)(const float*, const float*, const float*, const float*, int64_t, int64_t, int64_t, int) = nullptr;
  void (*run)(void*) = nullptr;
  const float* (*output)(void*) = nullptr;
  void (*destroy)(void*) = nullptr;
};

// The modules live next to libkiln.so (build tree, install tree, the device package).
std::string libDir() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&kiln::profile::summarize), &info) && info.dli_fname) {
    std::string lib = info.dli_fname;
    if (lib.find('/') != std::string::npos) return lib.substr(0, lib.rfind('/'));
  }
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "lib";
  std::string exe(buf, size_t(n));
  return exe.substr(0, exe.rfind('/')) + "/../lib";
}

Module load() {
  Module m;
  __builtin_cpu_init();
  std::vector<std::pair<std::string, std::string>> levels;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    levels.emplace_back("v4", "v4 (AVX-512)");
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) levels.emplace_back("v3", "v3 (AVX2, FMA)");
#endif
  levels.emplace_back("generic", "generic (SSE2)");
  const std::string dir = libDir();
  for (const auto& [file, name] : levels) {
    const std::string path = dir + "/kiln-eigen-" + file + ".so";
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = ::dlerror();
      m.error += "\n  " + path + ": " + (e ? e : "dlopen failed");
      continue;
    }
    m.isaName = reinterpret_cast<decltype(m.isaName)>(::dlsym(h, "kiln_eigen_isa"));
    m.create = reinterpret_cast<decltype(m.create)>(::dlsym(h, "kiln_eigen_gemm_create"));
    m.run = reinterpret_cast<decltype(m.run)>(::dlsym(h, "kiln_eigen_gemm_run"));
    m.output = reinterpret_cast<decltype(m.output)>(::dlsym(h, "kiln_eigen_gemm_output"));
    m.destroy = reinterpret_cast<decltype(m.destroy)>(::dlsym(h, "kiln_eigen_gemm_destroy"));
    if (m.isaName && m.create && m.run && m.output && m.destroy) {
      m.isa = name;
      m.error.clear();
      return m;
    }
    m.error += "\n  " + path + ": lacks the kiln_eigen_* entry points";
  }
  return m;
}

const Module& module() {
  static const Module m = load();
  if (m.isa.empty())
    throw kiln::Error(kiln::ErrorKind::NotFound, "the eigen route's module did not load:" + m.error);
  return m;
}

} // namespace

EigenGemm::EigenGemm(const float* a, const float* b, const float* bias, const float* res, int64_t M, int64_t N,
                     int64_t K, int epilogue)
    : handle_(module().create(a, b, bias, res, M, N, K, epilogue)) {}
EigenGemm::~EigenGemm() {
  if (handle_) module().destroy(handle_);
}
void EigenGemm::run() { module().run(handle_); }
const float* EigenGemm::output() const { return module().output(handle_); }
std::string EigenGemm::isa() { return module().isa; }
