#pragma once
// The toolkit's ptxas as the CUDA driver's JIT compiles on a GPU: a whole program. Tests
// without a GPU check a twin's spills, and a joined module's entries, with it. The test
// binary defines KILN_PTXAS (test/CMakeLists.txt).
#include <catch2/catch.hpp>

#include <cstdio>
#include <deque>
#include <fstream>
#include <string>
#include <utility>
#include <unistd.h>

namespace kiln::testing {

/// What the toolkit's ptxas says (-v) when it compiles `ptx` as a whole program for
/// sm_90a, as the driver's JIT does for a module with a twin on a GPU. A module holds a
/// dozen twins and a test asks about each in turn: the last few logs are kept, keyed by the
/// whole PTX text, so a module is compiled once (tests run one at a time in a process).
inline std::string wholeProgramLog(const std::string& ptx) {
  static std::deque<std::pair<std::string, std::string>> recent;
  for (const auto& [text, log] : recent)
    if (text == ptx) return log;
  char path[] = "/tmp/kiln-twin-XXXXXX";
  int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::close(fd);
  std::ofstream(path) << ptx;
  std::string cmd = std::string(KILN_PTXAS) + " -arch=sm_90a -O3 -v " + path + " -o /dev/null 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string log;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) log.append(buf, n);
  int rc = ::pclose(p);
  std::remove(path);
  INFO(log);
  REQUIRE(rc == 0);
  if (recent.size() == 4) recent.pop_front();
  recent.emplace_back(ptx, log);
  return log;
}

} // namespace kiln::testing
