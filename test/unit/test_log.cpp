// kiln's messages (kiln/log.hpp): levels, the engine's own sink, the default line on
// stderr. The message used throughout is a real one: a corrupt disk-cache entry, which
// kiln replaces and reports as a warning.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "../temp_dir.hpp"
#include "kiln/cache.hpp"
#include "kiln/catalogue.hpp"
#include "kiln/log.hpp"
#include "kiln/runtime.hpp"

using namespace kiln;
using kiln::testing::TempDir;
using Catch::Matchers::Contains;

namespace {

struct Captured {
  LogLevel level;
  std::string text;
};

/// Routes kiln's messages into a vector for the test's scope, at `level`; restores the
/// default sink and level after.
struct CaptureLog {
  std::mutex mu;
  std::vector<Captured> got;
  LogLevel before = log_level();
  explicit CaptureLog(LogLevel level) {
    set_log_level(level);
    set_log_sink([this](LogLevel l, std::string_view m) {
      std::lock_guard<std::mutex> lock(mu);
      got.push_back({l, std::string(m)});
    });
  }
  ~CaptureLog() {
    set_log_sink({});
    set_log_level(before);
  }
};

/// A cache directory holding one entry for `add`, overwritten with garbage: the next
/// compile of `add` from it logs a warning naming the file.
std::string corruptEntryIn(const TempDir& dir) {
  Runtime::create(Backend::cpu, {.cache_dir = dir.str()}).compile(catalogue::add(DType::f32));
  auto entries = cache::list(dir.str());
  REQUIRE(entries.size() == 1);
  const std::string path = dir.str() + "/" + entries[0].key.substr(0, 2) + "/" + entries[0].key + ".kiln";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "not a cache entry at all";
  return path;
}
CompiledKernel compileFrom(const TempDir& dir) {
  return Runtime::create(Backend::cpu, {.cache_dir = dir.str()}).compile(catalogue::add(DType::f32));
}

} // namespace

TEST_CASE("every log level reads back from its own word, and 'warning' is warn", "[log]") {
  for (LogLevel l : {LogLevel::trace, LogLevel::debug, LogLevel::info, LogLevel::warn, LogLevel::error, LogLevel::off})
    CHECK(parse_log_level(to_string(l)) == l);
  CHECK(parse_log_level("warning") == LogLevel::warn);
  CHECK_FALSE(parse_log_level("loud").has_value());
  CHECK_FALSE(parse_log_level("").has_value());
}

TEST_CASE("kiln's warnings reach the engine's sink with their level and text, and no prefix", "[log][cache]") {
  TempDir dir;
  const std::string path = corruptEntryIn(dir);
  CaptureLog log(LogLevel::warn);
  CHECK(compileFrom(dir).cache().outcome == CacheOutcome::miss);
  REQUIRE(log.got.size() == 1);
  CHECK(log.got[0].level == LogLevel::warn);
  CHECK_THAT(log.got[0].text, Contains("cache: " + path + ": ") && Contains("recompiling and replacing it"));
  CHECK(log.got[0].text.rfind("kiln:", 0) != 0);
  CHECK(log.got[0].text.find('\n') == std::string::npos);
}

TEST_CASE("a message below the level in force reaches no sink", "[log][cache]") {
  TempDir dir;
  corruptEntryIn(dir);
  LogLevel level = GENERATE(LogLevel::error, LogLevel::off);
  CaptureLog log(level);
  CHECK(log_level() == level);
  CHECK(compileFrom(dir).cache().outcome == CacheOutcome::miss); // the work is the same
  CHECK(log.got.empty());
}

TEST_CASE("a sink that throws loses its message, never the work that logged it", "[log][cache][errors]") {
  TempDir dir;
  corruptEntryIn(dir);
  const LogLevel before = log_level();
  set_log_level(LogLevel::warn);
  int calls = 0;
  set_log_sink([&](LogLevel, std::string_view) {
    ++calls;
    throw std::runtime_error("the engine's logger is broken");
  });
  CompiledKernel ck = compileFrom(dir);
  set_log_sink({});
  set_log_level(before);
  CHECK(calls == 1);
  CHECK(ck.cache().outcome == CacheOutcome::miss);
  CHECK(cache::list(dir.str()).at(0).valid); // replaced all the same
}

TEST_CASE("with no sink set, a warning is one line on stderr: 'kiln: warning: <text>'", "[log][cache]") {
  TempDir dir;
  const std::string path = corruptEntryIn(dir);
  const LogLevel before = log_level();
  set_log_level(LogLevel::warn);
  // Catch stderr (fd 2) in a file for the compile.
  const std::string file = dir.str() + "/stderr.txt";
  std::fflush(stderr);
  const int saved = ::dup(2), fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(saved >= 0);
  REQUIRE(fd >= 0);
  ::dup2(fd, 2);
  ::close(fd);
  compileFrom(dir);
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  set_log_level(before);
  std::ostringstream text;
  text << std::ifstream(file).rdbuf();
  CHECK(text.str() == "kiln: warning: cache: " + path + ": not a kiln cache entry (bad magic); recompiling and replacing it\n");
}
