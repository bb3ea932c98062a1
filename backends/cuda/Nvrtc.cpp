#include "Nvrtc.h"
#include "DynamicLibrary.h"

#include <nvrtc.h>

#include <chrono>
#include <memory>
#include <sys/stat.h>

#include "kiln/error.hpp"

namespace kiln::cuda {
namespace {

// X-macro: every NVRTC entry point kiln uses (unversioned exports of libnvrtc.so.13).
#define KILN_NVRTC_SYMBOLS(X)                                                            \
  X(nvrtcVersion)                                                                        \
  X(nvrtcGetErrorString)                                                                 \
  X(nvrtcCreateProgram)                                                                  \
  X(nvrtcDestroyProgram)                                                                 \
  X(nvrtcCompileProgram)                                                                 \
  X(nvrtcGetProgramLogSize)                                                              \
  X(nvrtcGetProgramLog)                                                                  \
  X(nvrtcGetCUBINSize)                                                                   \
  X(nvrtcGetCUBIN)

struct NvrtcApi {
#define KILN_NVRTC_MEMBER(name) decltype(&::name) name = nullptr;
  KILN_NVRTC_SYMBOLS(KILN_NVRTC_MEMBER)
#undef KILN_NVRTC_MEMBER
  std::string path;
  std::string version; // "NVRTC 13.0"
};

using LoadResult = LoadedLibrary<NvrtcApi>;

LoadResult load() {
  auto api = std::make_unique<NvrtcApi>();
  std::string tried;
  void* h = openFirst(toolkitCandidates({"libnvrtc.so.13"}, "libnvrtc.so.13"),
                      [&](void* handle) {
                        SymbolResolver resolve{handle};
#define KILN_NVRTC_RESOLVE(name) api->name = reinterpret_cast<decltype(&::name)>(resolve(#name));
                        KILN_NVRTC_SYMBOLS(KILN_NVRTC_RESOLVE)
#undef KILN_NVRTC_RESOLVE
                        return resolve.missing;
                      },
                      api->path, tried);
  LoadResult r;
  if (!h) {
    r.error = "NVRTC not found: hand-written CUDA kernels are compiled with the CUDA 13 toolkit's "
              "libnvrtc.so.13, and no candidate loaded:" + tried +
              "\n  install the toolkit's NVRTC (or add its lib64 to LD_LIBRARY_PATH, or set CUDA_HOME)";
    return r;
  }
  int major = 0, minor = 0;
  api->nvrtcVersion(&major, &minor);
  api->version = "NVRTC " + std::to_string(major) + "." + std::to_string(minor);
  r.api = std::move(api);
  return r;
}

const LoadResult& loaded() { return loadOnce(&load); }
const NvrtcApi& api() { return loaded().get(); }

bool isFile(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The program and its log, destroyed on every path.
struct Program {
  nvrtcProgram p = nullptr;
  ~Program() {
    if (p) api().nvrtcDestroyProgram(&p);
  }
  std::string log() const {
    size_t n = 0;
    if (api().nvrtcGetProgramLogSize(p, &n) != NVRTC_SUCCESS || n <= 1) return {};
    std::string s(n, '\0');
    api().nvrtcGetProgramLog(p, s.data());
    s.resize(n - 1); // drop the terminating NUL
    return s;
  }
};

// An ELF function symbol `entry` has a section ".text.<entry>": look for that name.
bool cubinHasFunction(const std::vector<char>& cubin, const std::string& entry) {
  const std::string section = ".text." + entry;
  std::string_view image(cubin.data(), cubin.size());
  for (size_t pos = image.find(section); pos != std::string_view::npos; pos = image.find(section, pos + 1))
    if (pos + section.size() < image.size() && image[pos + section.size()] == '\0') return true;
  return false;
}

} // namespace

bool nvrtcAvailable(std::string* why) {
  const LoadResult& r = loaded();
  if (!r.api && why) *why = r.error;
  return bool(r.api);
}

std::string toolkitIncludeDir() {
  std::vector<std::string> roots;
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* root = std::getenv(env); root && *root) roots.push_back(root);
  roots.push_back("/usr/local/cuda");
  for (const auto& root : roots)
    if (isFile(root + "/include/cuda_runtime.h")) return root + "/include";
  return {};
}

NvrtcResult compileCudaSource(const std::string& name, const std::string& code, const std::string& entry,
                              const std::string& arch, const std::vector<std::string>& options) {
  const NvrtcApi& nv = api();
  auto t0 = std::chrono::steady_clock::now();
  Program prog;
  nvrtcResult rc = nv.nvrtcCreateProgram(&prog.p, code.c_str(), name.c_str(), 0, nullptr, nullptr);
  if (rc != NVRTC_SUCCESS)
    throw Error(ErrorKind::CompileFailed, name + ": nvrtcCreateProgram failed: " + nv.nvrtcGetErrorString(rc));
  std::vector<std::string> opts = {"--gpu-architecture=" + arch, "-std=c++17"};
  if (std::string inc = toolkitIncludeDir(); !inc.empty()) opts.push_back("--include-path=" + inc);
  opts.insert(opts.end(), options.begin(), options.end());
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  rc = nv.nvrtcCompileProgram(prog.p, int(argv.size()), argv.data());
  NvrtcResult out;
  out.log = prog.log();
  out.compiler = loaded().api->version;
  if (rc == NVRTC_ERROR_INVALID_OPTION && out.log.find("arch") != std::string::npos)
    throw Error(ErrorKind::Unsupported, name + ": " + out.compiler + " cannot compile for " + arch + ":\n" + out.log);
  if (rc != NVRTC_SUCCESS) {
    std::string opt;
    for (const auto& o : opts) opt += " " + o;
    throw Error(ErrorKind::CompileFailed, name + ": NVRTC failed (" + nv.nvrtcGetErrorString(rc) + ") with options" +
                                              opt + ":\n" + out.log);
  }
  size_t n = 0;
  rc = nv.nvrtcGetCUBINSize(prog.p, &n);
  if (rc != NVRTC_SUCCESS || n == 0)
    throw Error(ErrorKind::CompileFailed, name + ": NVRTC produced no cubin for " + arch + " (" +
                                              nv.nvrtcGetErrorString(rc) + ")");
  out.cubin.resize(n);
  nv.nvrtcGetCUBIN(prog.p, out.cubin.data());
  out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!cubinHasFunction(out.cubin, entry))
    throw Error(ErrorKind::NotFound, name + ": no __global__ function '" + entry +
                                         "' in the compiled program (declare it extern \"C\" so its name is not "
                                         "mangled)");
  return out;
}

} // namespace kiln::cuda
