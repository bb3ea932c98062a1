#include "Ptxas.h"

#include "kiln/error.hpp"
#include "kiln/files.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <spawn.h>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace kiln::cuda {

namespace {

/// A private directory under $TMPDIR (or /tmp), removed with what it holds.
class TempDir {
public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/kiln-ptxas-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data()))
      throw Error(ErrorKind::Runtime, "ptxas: cannot make a temporary directory from " + pattern + ": " + std::strerror(errno));
    path_ = buf.data();
  }
  ~TempDir() {
    for (const char* f : {"/in.ptx", "/out.cubin", "/log.txt"}) ::unlink((path_ + f).c_str());
    ::rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

/// Runs `argv` (argv[0] a path) with stdout and stderr into `logPath`; its exit status, or -1
/// with `why` when it could not be started or did not exit normally. posix_spawn: kiln runs
/// inside an engine's threaded process, where fork would copy it.
int runTo(const std::vector<std::string>& argv, const std::string& logPath, std::string* why) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, logPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  posix_spawn_file_actions_addclosefrom_np(&fa, 3); // none of the engine's files
#endif
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    *why = "cannot start " + argv[0] + ": " + std::strerror(rc);
    return -1;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      *why = std::string("waiting for ptxas: ") + std::strerror(errno);
      return -1;
    }
  if (!WIFEXITED(status)) {
    *why = argv[0] + " ended by signal " + std::to_string(WTERMSIG(status));
    return -1;
  }
  return WEXITSTATUS(status);
}

/// `path`'s release ("13.0") from `ptxas --version` ("... release 13.0, V13.0.88"), or "".
std::string releaseOf(const std::string& path, std::string* why) {
  TempDir dir;
  const std::string log = dir.path() + "/log.txt";
  const int rc = runTo({path, "--version"}, log, why);
  if (rc != 0) {
    if (rc > 0) *why = path + " --version exited with status " + std::to_string(rc);
    return "";
  }
  const std::string out = read_file(log, "ptxas --version output");
  const auto at = out.find("release ");
  if (out.find("ptxas") == std::string::npos || at == std::string::npos) {
    *why = path + " --version does not name a ptxas release";
    return "";
  }
  const auto end = out.find_first_of(", \n", at + 8);
  return out.substr(at + 8, end == std::string::npos ? std::string::npos : end - at - 8);
}

bool executable(const std::string& path) { return !path.empty() && ::access(path.c_str(), X_OK) == 0; }

} // namespace

std::optional<PtxasTool> findPtxas(const std::string& setting, const std::string& release, std::string* why) {
  if (setting == "off") {
    *why = "KILN_PTXAS=off";
    return std::nullopt;
  }
  if (!setting.empty()) { // asked for by name: it runs, or the runtime says why not
    std::string problem, found;
    try {
      if (executable(setting)) found = releaseOf(setting, &problem);
    } catch (const Error& e) {
      problem = e.what();
    }
    if (found.empty())
      throw Error(ErrorKind::InvalidArgument,
                  "KILN_PTXAS is '" + setting + "', which does not run as ptxas (" +
                      (problem.empty() ? "no such executable file" : problem) +
                      "); name the CUDA toolkit's ptxas, or 'off' to keep deploy entries as PTX");
    if (found != release)
      throw Error(ErrorKind::InvalidArgument,
                  "KILN_PTXAS is '" + setting + "', ptxas " + found + ", but kiln's nvJitLink is " +
                      (release.empty() ? "not available" : release) +
                      ": the machine code must be the release the cache key names; name that toolkit's ptxas, or 'off'");
    return PtxasTool{setting, found};
  }
  if (release.empty()) {
    *why = "no nvJitLink, whose release a ptxas must match";
    return std::nullopt;
  }
  std::vector<std::string> candidates;
#ifdef KILN_TOOLKIT_PTXAS
  candidates.push_back(KILN_TOOLKIT_PTXAS);
#endif
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    for (std::string d; std::getline(dirs, d, ':');)
      if (!d.empty()) candidates.push_back(d + "/ptxas");
  }
  std::string others; // ptxas programs of other releases, for `why`
  for (const std::string& c : candidates) {
    if (!executable(c)) continue;
    std::string problem, found;
    try {
      found = releaseOf(c, &problem);
    } catch (const Error&) { // (no temporary directory: this one cannot be asked)
      continue;
    }
    if (found == release) return PtxasTool{c, found};
    if (!found.empty()) others += (others.empty() ? "" : ", ") + c + " (" + found + ")";
  }
  *why = others.empty() ? "no ptxas found (the CUDA toolkit's bin directory is not on PATH; KILN_PTXAS names one)"
                        : "no ptxas of nvJitLink's release " + release + " (found " + others + ")";
  return std::nullopt;
}

CubinResult ptxasCompile(const PtxasTool& tool, const std::string& ptx, const std::string& arch,
                         const std::string& kernelName, int threads) {
  TempDir dir;
  const std::string in = dir.path() + "/in.ptx", out = dir.path() + "/out.cubin", log = dir.path() + "/log.txt";
  {
    std::ofstream f(in, std::ios::binary);
    f << ptx;
    if (!f.flush())
      throw Error(ErrorKind::Runtime, "ptxas: cannot write the PTX of kernel '" + kernelName + "' to " + in);
  }
  std::vector<std::string> argv = {tool.path, "-arch=" + arch, "-O3", "-v"};
  if (threads != 1) argv.insert(argv.end(), {"-split-compile", std::to_string(threads > 0 ? threads : 0)});
  argv.insert(argv.end(), {in, "-o", out});
  std::string why;
  const int rc = runTo(argv, log, &why);
  CubinResult r;
  r.info_log = read_file(log, "ptxas's log");
  if (rc < 0) throw Error(ErrorKind::Runtime, "ptxas for kernel '" + kernelName + "': " + why);
  if (rc != 0)
    throw Error(ErrorKind::CompileFailed, "ptxas " + tool.release + " (" + tool.path + ") compiling kernel '" + kernelName +
                                              "' for " + arch + " failed (exit status " + std::to_string(rc) +
                                              "):\n" + r.info_log);
  const std::string image = read_file(out, "ptxas's cubin");
  if (image.size() < 4 || image.compare(0, 4, "\x7f" "ELF") != 0)
    throw Error(ErrorKind::CompileFailed, "ptxas " + tool.release + " compiling kernel '" + kernelName +
                                              "' wrote no ELF image to " + out);
  r.cubin.assign(image.begin(), image.end());
  r.compiler = "ptxas " + tool.release;
  r.arch = arch;
  parsePtxasInfo(r.info_log, kernelName, r);
  return r;
}

} // namespace kiln::cuda
