// kiln::read_file: the one way kiln (and its tools) read a file they parse — bounded, and
// every failure a kiln::Error that names the file and what it was for.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "kiln/error.hpp"
#include "kiln/files.hpp"

#include "../temp_dir.hpp"

using namespace kiln;
using Catch::Matchers::Contains;

namespace {

ErrorKind kindOf(const std::string& path, std::size_t bound = kMaxFileBytes) {
  try {
    read_file(path, "test file", bound);
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Contains("test file '" + path + "'"));
    return e.kind();
  }
  FAIL("read " << path);
  return ErrorKind::Runtime;
}

} // namespace

TEST_CASE("read_file returns a file's bytes, binary ones included", "[files]") {
  const std::string path = "/tmp/kiln-files-" + std::to_string(::getpid());
  const std::string bytes = std::string("KILN\0\xff\n", 7) + std::string(100000, 'x');
  std::ofstream(path, std::ios::binary) << bytes;
  CHECK(read_file(path, "test file") == bytes);
  CHECK(path_exists(path));
  std::remove(path.c_str());
  CHECK_FALSE(path_exists(path));
}

TEST_CASE("read_file names what is wrong: nothing there, a directory, too large, a device that never ends",
          "[files][errors]") {
  CHECK(kindOf("/nonexistent-kiln-dir/x.json") == ErrorKind::NotFound);
  kiln::testing::TempDir dir("kiln-files");
  CHECK(kindOf(dir.str()) == ErrorKind::InvalidArgument);
  CHECK_THROWS_WITH(read_file(dir.str(), "test file"), Contains("is a directory"));
  const std::string path = (dir.path / "big").string();
  std::ofstream(path) << std::string(4096, 'x');
  CHECK(kindOf(path, 4095) == ErrorKind::InvalidArgument);
  CHECK(read_file(path, "test file", 4096).size() == 4096); // exactly the bound is fine
  // Endless zeros: stopped at the bound, not when memory runs out.
  CHECK_THROWS_WITH(read_file("/dev/zero", "test file", 1 << 20), Contains("never ends"));
}
