#pragma once
// Shared by the test binaries: an environment variable set for one scope (kiln reads its
// KILN_* variables when a Runtime is created).
#include <cstdlib>
#include <optional>
#include <string>

namespace kiln::testing {

struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(const char* n, const char* value) : name(n) {
    if (const char* o = std::getenv(n)) old = o;
    ::setenv(n, value, 1);
  }
  ~ScopedEnv() {
    if (old) ::setenv(name.c_str(), old->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
};

} // namespace kiln::testing
