#pragma once
#include <stdexcept>
#include <string>

#include "kiln/export.hpp"

namespace kiln {

/// What part of kiln rejected the request; lets a caller branch without parsing text.
enum class ErrorKind {
  InvalidKernel,   ///< the DSL program or its tile IR is malformed
  InvalidArgument, ///< a launch argument has the wrong rank, dtype, shape or stride
  CompileFailed,   ///< a lowering pass or code generation failed
  Unsupported,     ///< backend, dtype or option not available here
  NotFound,        ///< unknown kernel, flag or file
  Runtime,         ///< execution failed
};

KILN_API const char* to_string(ErrorKind kind);

/// Every failure kiln reports is a kiln::Error. The message names the kernel, the
/// argument and the rule that was broken, plus the IR location when there is one.
class KILN_API Error : public std::runtime_error {
public:
  Error(ErrorKind kind, const std::string& message)
      : std::runtime_error(message), kind_(kind) {}
  ~Error() override; // out of line: the vtable and typeinfo live in libkiln.so
  ErrorKind kind() const noexcept { return kind_; }

private:
  ErrorKind kind_;
};

} // namespace kiln
