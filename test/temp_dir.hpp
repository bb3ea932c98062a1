#pragma once
// A fresh, empty directory under the system's temporary directory for one test, removed
// with everything in it when the test ends.
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace kiln::testing {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "kiln-test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (!::mkdtemp(pattern.data())) throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string str() const { return path.string(); }
};

} // namespace kiln::testing
