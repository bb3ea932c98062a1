#include "kiln/error.hpp"
#include "Runtime/Throw.h"

namespace kiln {

// Spelled like the enumerators so a log line can be grepped back to the enum.
Error::~Error() = default;

const char* to_string(ErrorKind kind) {
  switch (kind) {
  case ErrorKind::InvalidKernel: return "InvalidKernel";
  case ErrorKind::InvalidArgument: return "InvalidArgument";
  case ErrorKind::CompileFailed: return "CompileFailed";
  case ErrorKind::Unsupported: return "Unsupported";
  case ErrorKind::NotFound: return "NotFound";
  case ErrorKind::Runtime: return "Runtime";
  }
  return "Unknown";
}

namespace detail {
void throwError(ErrorKind kind, const std::string& message) { throw Error(kind, message); }
} // namespace detail

} // namespace kiln
