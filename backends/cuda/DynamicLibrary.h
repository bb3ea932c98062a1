#pragma once
// Internal: finding and opening a CUDA toolkit library with dlopen, shared by the
// nvJitLink and cuBLASLt loaders (the driver has its own: libcuda is not in the toolkit).
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <string>
#include <memory>
#include <vector>

#include "kiln/error.hpp"

namespace kiln::cuda {

/// A toolkit library's entry-point table, or why it did not load.
template <class Api> struct LoadedLibrary {
  std::unique_ptr<Api> api;
  std::string error;
  /// The table; kiln::Error(Unsupported) with the reason when the library did not load.
  const Api& get() const {
    if (!api) throw Error(ErrorKind::Unsupported, error);
    return *api;
  }
};

/// Runs `load` once per process (thread-safe; a failure is remembered too) and keeps the
/// result forever, so the library stays usable during static destruction.
template <class Api> const LoadedLibrary<Api>& loadOnce(LoadedLibrary<Api> (*load)()) {
  static const LoadedLibrary<Api>* result = new LoadedLibrary<Api>(load());
  return *result;
}

/// Where a toolkit library may be: each name through the loader's own search, then
/// `lib64File` under $CUDA_HOME, $CUDA_PATH and /usr/local/cuda.
inline std::vector<std::string> toolkitCandidates(std::initializer_list<const char*> names,
                                                  const std::string& lib64File) {
  std::vector<std::string> out(names.begin(), names.end());
  auto add = [&](std::string path) { // once each: $CUDA_HOME is often /usr/local/cuda
    if (std::find(out.begin(), out.end(), path) == out.end()) out.push_back(std::move(path));
  };
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* root = std::getenv(env); root && *root) add(std::string(root) + "/lib64/" + lib64File);
  add("/usr/local/cuda/lib64/" + lib64File);
  return out;
}

/// dlsym with an optional older name, collecting the names found under neither: the body
/// of every loader's `resolve` callback (X-macro tables call it once per entry point).
struct SymbolResolver {
  void* handle = nullptr;
  std::string missing; ///< "a, b": what the library lacks
  void* operator()(const char* name, const char* fallback = nullptr) {
    void* p = ::dlsym(handle, name);
    if (!p && fallback) p = ::dlsym(handle, fallback);
    if (!p) missing += (missing.empty() ? "" : ", ") + std::string(name);
    return p;
  }
};

/// Opens the first candidate that loads and for which `resolve(handle)` finds every symbol
/// (it returns the missing names, empty when complete). Returns the handle and sets `path`,
/// or returns nullptr with one line per failed candidate appended to `tried`. A handle
/// that loaded but lacked symbols is left open: dlclose of a half-used library buys
/// nothing, and this runs once per process.
inline void* openFirst(const std::vector<std::string>& candidates,
                       const std::function<std::string(void* handle)>& resolve, std::string& path,
                       std::string& tried) {
  for (const auto& lib : candidates) {
    void* h = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = ::dlerror();
      tried += "\n  dlopen(" + lib + "): " + (e ? e : "failed");
      continue;
    }
    std::string missing = resolve(h);
    if (!missing.empty()) {
      tried += "\n  " + lib + " lacks " + missing;
      continue;
    }
    path = lib;
    return h;
  }
  return nullptr;
}

} // namespace kiln::cuda
