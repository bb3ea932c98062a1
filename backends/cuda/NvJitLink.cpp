#include "NvJitLink.h"

// Only the header's types and prototypes are used: no nvJitLink symbol is referenced at
// link time. NVJITLINK_NO_INLINE drops the header's static-inline wrappers
// (nvJitLinkCreate -> __nvJitLinkCreate_13_0, ...).
#define NVJITLINK_NO_INLINE
#include <nvJitLink.h>

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>

#include "DynamicLibrary.h"
#include "kiln/error.hpp"

namespace kiln::cuda {
namespace {

// X-macro: member, exported symbol the CUDA 13.0 header binds to, unversioned fallback.
// libnvJitLink.so.13 exports both spellings (nm -D): __nvJitLinkCreate_13_0 and
// nvJitLinkCreate, ...; nvJitLinkVersion is unversioned only.
#define KILN_NVJITLINK_SYMBOLS(X)                                                        \
  X(create, __nvJitLinkCreate_13_0, "nvJitLinkCreate")                                    \
  X(addData, __nvJitLinkAddData_13_0, "nvJitLinkAddData")                                 \
  X(complete, __nvJitLinkComplete_13_0, "nvJitLinkComplete")                              \
  X(getLinkedCubinSize, __nvJitLinkGetLinkedCubinSize_13_0, "nvJitLinkGetLinkedCubinSize") \
  X(getLinkedCubin, __nvJitLinkGetLinkedCubin_13_0, "nvJitLinkGetLinkedCubin")            \
  X(getErrorLogSize, __nvJitLinkGetErrorLogSize_13_0, "nvJitLinkGetErrorLogSize")         \
  X(getErrorLog, __nvJitLinkGetErrorLog_13_0, "nvJitLinkGetErrorLog")                     \
  X(getInfoLogSize, __nvJitLinkGetInfoLogSize_13_0, "nvJitLinkGetInfoLogSize")            \
  X(getInfoLog, __nvJitLinkGetInfoLog_13_0, "nvJitLinkGetInfoLog")                        \
  X(destroy, __nvJitLinkDestroy_13_0, "nvJitLinkDestroy")                                 \
  X(version, nvJitLinkVersion, nullptr)

struct NvJitLinkApi {
#define KILN_NVJL_MEMBER(member, symbol, fallback) decltype(&::symbol) member = nullptr;
  KILN_NVJITLINK_SYMBOLS(KILN_NVJL_MEMBER)
#undef KILN_NVJL_MEMBER
  std::string path;
  std::string versionString; // "nvJitLink 13.0"
};

using LoadResult = LoadedLibrary<NvJitLinkApi>;

LoadResult loadNvJitLink() {
  auto api = std::make_unique<NvJitLinkApi>();
  std::string tried;
  void* h = openFirst(toolkitCandidates({"libnvJitLink.so.13", "libnvJitLink.so"}, "libnvJitLink.so.13"),
                      [&](void* handle) {
                        SymbolResolver resolve{handle};
#define KILN_NVJL_RESOLVE(member, symbol, fallback)                                      \
  api->member = reinterpret_cast<decltype(&::symbol)>(resolve(#symbol, fallback));
                        KILN_NVJITLINK_SYMBOLS(KILN_NVJL_RESOLVE)
#undef KILN_NVJL_RESOLVE
                        return resolve.missing;
                      },
                      api->path, tried);
  if (h) {
    unsigned major = 0, minor = 0;
    if (api->version(&major, &minor) == NVJITLINK_SUCCESS)
      api->versionString = "nvJitLink " + std::to_string(major) + "." + std::to_string(minor);
    else
      api->versionString = "nvJitLink (unknown version)";
    LoadResult r;
    r.api = std::move(api);
    return r;
  }
  LoadResult r;
  r.error = "nvJitLink not found: kiln turns PTX into a cubin with the CUDA 13 toolkit's "
            "libnvJitLink.so.13, and no candidate loaded:" +
            tried +
            "\n  install the toolkit's nvJitLink (or add its lib64 to LD_LIBRARY_PATH, or "
            "set CUDA_HOME)";
  return r;
}

const LoadResult& loaded() { return loadOnce(&loadNvJitLink); }
const NvJitLinkApi& api() { return loaded().get(); }

const char* resultName(nvJitLinkResult r) {
  switch (r) {
#define KILN_NVJL_ERR(x) case x: return #x;
    KILN_NVJL_ERR(NVJITLINK_SUCCESS)
    KILN_NVJL_ERR(NVJITLINK_ERROR_UNRECOGNIZED_OPTION)
    KILN_NVJL_ERR(NVJITLINK_ERROR_MISSING_ARCH)
    KILN_NVJL_ERR(NVJITLINK_ERROR_INVALID_INPUT)
    KILN_NVJL_ERR(NVJITLINK_ERROR_PTX_COMPILE)
    KILN_NVJL_ERR(NVJITLINK_ERROR_NVVM_COMPILE)
    KILN_NVJL_ERR(NVJITLINK_ERROR_INTERNAL)
    KILN_NVJL_ERR(NVJITLINK_ERROR_THREADPOOL)
    KILN_NVJL_ERR(NVJITLINK_ERROR_UNRECOGNIZED_INPUT)
    KILN_NVJL_ERR(NVJITLINK_ERROR_FINALIZE)
    KILN_NVJL_ERR(NVJITLINK_ERROR_NULL_INPUT)
    KILN_NVJL_ERR(NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS)
    KILN_NVJL_ERR(NVJITLINK_ERROR_INCORRECT_INPUT_TYPE)
    KILN_NVJL_ERR(NVJITLINK_ERROR_ARCH_MISMATCH)
    KILN_NVJL_ERR(NVJITLINK_ERROR_OUTDATED_LIBRARY)
    KILN_NVJL_ERR(NVJITLINK_ERROR_MISSING_FATBIN)
    KILN_NVJL_ERR(NVJITLINK_ERROR_UNRECOGNIZED_ARCH)
    KILN_NVJL_ERR(NVJITLINK_ERROR_UNSUPPORTED_ARCH)
    KILN_NVJL_ERR(NVJITLINK_ERROR_LTO_NOT_ENABLED)
#undef KILN_NVJL_ERR
  }
  return "NVJITLINK_ERROR (unknown code)";
}

std::string describe(nvJitLinkResult r) {
  std::string s = resultName(r);
  if (std::strstr(s.c_str(), "unknown")) s += " " + std::to_string(static_cast<int>(r));
  return s;
}

// Owns an nvJitLinkHandle.
struct Linker {
  const NvJitLinkApi& api;
  nvJitLinkHandle h = nullptr;
  ~Linker() {
    if (h) api.destroy(&h);
  }
  std::string errorLog() const { return log(api.getErrorLogSize, api.getErrorLog); }
  std::string infoLog() const { return log(api.getInfoLogSize, api.getInfoLog); }

private:
  template <class SizeFn, class LogFn> std::string log(SizeFn sizeFn, LogFn logFn) const {
    size_t n = 0;
    if (!h || sizeFn(h, &n) != NVJITLINK_SUCCESS || n == 0) return {};
    std::string s(n, '\0');
    if (logFn(h, s.data()) != NVJITLINK_SUCCESS) return {};
    while (!s.empty() && (s.back() == '\0' || s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }
};

// The number written just before `suffix` in `line` (e.g. "Used 8 registers" with
// suffix " registers" -> 8), or -1.
int numberBefore(const std::string& line, const char* suffix) {
  const auto pos = line.find(suffix);
  if (pos == std::string::npos || pos == 0) return -1;
  size_t begin = pos;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(line[begin - 1]))) --begin;
  if (begin == pos) return -1;
  return std::atoi(line.substr(begin, pos - begin).c_str());
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

} // namespace

bool parsePtxasInfo(const std::string& log, const std::string& kernelName, CubinResult& out) {
  // Two reports can be present. ptxas's (lines starting "ptxas"), which is the primary one
  // and the only one with spill counts, and nvJitLink's own summary of the linked result
  // (lines starting "info    :"), used only when the ptxas report is missing:
  //   info    : Function properties for '<k>':
  //   info    : used <R> registers, used <B> barriers, <S> stack, <X> bytes smem, ...
  std::istringstream in(log);
  std::string line;
  std::string current;    // entry ptxas is compiling ("Compiling entry function 'x'")
  std::string properties; // function whose "N bytes stack frame" line comes next
  bool inLinkSummary = false; // after "info    : Function properties for '<kernelName>':"
  bool fromPtxas = false, fromLink = false;
  CubinResult link;
  while (std::getline(in, line)) {
    // (ptxas run as a program prints the "bytes stack frame" line indented, without the
    // "ptxas         ." prefix nvJitLink's log gives it.)
    const bool ptxasLine = line.rfind("ptxas", 0) == 0 ||
                           (!properties.empty() && line.rfind("    ", 0) == 0 && line.find(" bytes stack frame") != std::string::npos);
    if (ptxasLine) {
      if (auto p = line.find("Compiling entry function '"); p != std::string::npos) {
        const auto b = p + std::strlen("Compiling entry function '");
        const auto e = line.find('\'', b);
        current = line.substr(b, e == std::string::npos ? std::string::npos : e - b);
        properties.clear();
      } else if (auto q = line.find("Function properties for "); q != std::string::npos) {
        properties = trim(line.substr(q + std::strlen("Function properties for ")));
      } else if (line.find(" bytes stack frame") != std::string::npos) {
        if (!properties.empty() && properties == kernelName) {
          out.stack_bytes = numberBefore(line, " bytes stack frame");
          out.spill_stores = numberBefore(line, " bytes spill stores");
          out.spill_loads = numberBefore(line, " bytes spill loads");
        }
        properties.clear();
      } else if (current == kernelName && line.find("Used ") != std::string::npos &&
                 line.find(" registers") != std::string::npos) {
        out.registers = numberBefore(line, " registers");
        out.barriers = numberBefore(line, " barriers");
        const int smem = numberBefore(line, " bytes smem");
        out.shared_bytes = smem < 0 ? 0 : smem; // ptxas omits "0 bytes smem"
        fromPtxas = true;
      }
      continue;
    }
    if (auto p = line.find("Function properties for '"); p != std::string::npos) {
      const auto b = p + std::strlen("Function properties for '");
      inLinkSummary = line.substr(b, line.find('\'', b) - b) == kernelName;
      continue;
    }
    if (inLinkSummary && line.find(" registers") != std::string::npos) {
      link.registers = numberBefore(line, " registers");
      link.barriers = numberBefore(line, " barriers");
      link.stack_bytes = numberBefore(line, " stack");
      const int smem = numberBefore(line, " bytes smem");
      link.shared_bytes = smem < 0 ? 0 : smem;
      fromLink = true;
    }
    inLinkSummary = false;
  }
  if (!fromPtxas && fromLink) {
    out.registers = link.registers;
    out.barriers = link.barriers;
    out.shared_bytes = link.shared_bytes;
    if (out.stack_bytes < 0) out.stack_bytes = link.stack_bytes;
  }
  return fromPtxas || fromLink;
}

std::vector<std::string> ptxasNotes(const std::string& log) {
  std::vector<std::string> notes;
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("warning") == std::string::npos && line.find("Performance Loss") == std::string::npos) continue;
    if (auto p = line.find(" : "); line.rfind("ptxas", 0) == 0 && p != std::string::npos) line = line.substr(p + 3);
    notes.push_back(trim(line));
  }
  return notes;
}

void appendPtxasNotes(std::string& notes, const std::string& log) {
  for (const std::string& note : ptxasNotes(log)) notes += (notes.empty() ? "" : "; ") + note;
}

bool nvJitLinkAvailable(std::string* why) {
  const LoadResult& r = loaded();
  if (!r.api && why) *why = r.error;
  return r.api != nullptr;
}

std::string nvJitLinkVersionString() { return api().versionString; }

CubinResult ptxToCubin(const std::string& ptx, const std::string& arch,
                       const std::string& kernelName,
                       const std::vector<std::string>& extraOptions) {
  const NvJitLinkApi& a = api();
  const std::string what =
      "compiling PTX of kernel '" + kernelName + "' for " + arch + " with " + a.versionString;

  // -no-cache: where a driver is installed, nvJitLink 13 keeps a disk cache
  // (~/.nv/ComputeCache) across processes, and on a hit its info log has only its own
  // summary, without ptxas's report (no spill counts): the metadata would depend on what
  // ran before. kiln's own cache stores cubin + metadata, so nvJitLink's is redundant.
  std::vector<std::string> options = {"-arch=" + arch, "-O3", "-verbose", "-no-cache"};
  options.insert(options.end(), extraOptions.begin(), extraOptions.end());
  std::vector<const char*> argv;
  std::string optionText;
  for (const auto& o : options) {
    argv.push_back(o.c_str());
    optionText += (optionText.empty() ? "" : " ") + o;
  }

  Linker link{a};
  if (nvJitLinkResult r = a.create(&link.h, static_cast<uint32_t>(argv.size()), argv.data());
      r != NVJITLINK_SUCCESS) {
    link.h = nullptr; // not created: nothing to destroy, no log to read
    const bool badArch = r == NVJITLINK_ERROR_UNRECOGNIZED_ARCH ||
                         r == NVJITLINK_ERROR_UNSUPPORTED_ARCH ||
                         r == NVJITLINK_ERROR_MISSING_ARCH;
    throw Error(badArch ? ErrorKind::Unsupported : ErrorKind::CompileFailed,
                "nvJitLink: " + what + ": nvJitLinkCreate(" + optionText + ") failed (" +
                    describe(r) + ")" +
                    (badArch ? "; this nvJitLink does not support " + arch : std::string()));
  }

  auto fail = [&](const char* step, nvJitLinkResult r) {
    std::string log = link.errorLog();
    throw Error(ErrorKind::CompileFailed, "nvJitLink: " + what + " failed at " + step + " (" +
                                              describe(r) + ", options: " + optionText + ")" +
                                              (log.empty() ? std::string(": no error log")
                                                           : ":\n" + log));
  };

  const std::string inputName = (kernelName.empty() ? std::string("kernel") : kernelName) + ".ptx";
  if (nvJitLinkResult r = a.addData(link.h, NVJITLINK_INPUT_PTX, ptx.c_str(), ptx.size(),
                                    inputName.c_str());
      r != NVJITLINK_SUCCESS)
    fail("nvJitLinkAddData", r);
  if (nvJitLinkResult r = a.complete(link.h); r != NVJITLINK_SUCCESS) fail("nvJitLinkComplete", r);

  CubinResult out;
  out.compiler = a.versionString;
  out.arch = arch;
  out.info_log = link.infoLog();
  size_t size = 0;
  if (nvJitLinkResult r = a.getLinkedCubinSize(link.h, &size); r != NVJITLINK_SUCCESS)
    fail("nvJitLinkGetLinkedCubinSize", r);
  out.cubin.resize(size);
  if (nvJitLinkResult r = a.getLinkedCubin(link.h, out.cubin.data()); r != NVJITLINK_SUCCESS)
    fail("nvJitLinkGetLinkedCubin", r);
  if (out.cubin.size() < 4 || std::memcmp(out.cubin.data(), "\x7f" "ELF", 4) != 0)
    throw Error(ErrorKind::CompileFailed,
                "nvJitLink: " + what + " returned " + std::to_string(out.cubin.size()) +
                    " bytes that are not an ELF cubin");

  if (!kernelName.empty() && !parsePtxasInfo(out.info_log, kernelName, out)) {
    // Tell "the log format changed" (leave -1s) from "no such kernel" (an error): the
    // functions the log names, in ptxas's report or in nvJitLink's summary.
    std::vector<std::string> names;
    std::istringstream in(out.info_log);
    std::string line;
    for (const char* key : {"Compiling entry function '", "Function properties for '"}) {
      in.clear();
      in.seekg(0);
      while (std::getline(in, line))
        if (auto p = line.find(key); p != std::string::npos) {
          const auto b = p + std::strlen(key);
          const std::string n = line.substr(b, line.find('\'', b) - b);
          if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
        }
    }
    if (!names.empty()) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "'" : ", '") + n + "'";
      throw Error(ErrorKind::NotFound, "nvJitLink: " + what + ": the PTX has no entry '" +
                                           kernelName + "' (entries: " + list + ")");
    }
  }
  return out;
}

} // namespace kiln::cuda
