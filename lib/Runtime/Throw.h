#pragma once
// Internal: throwing kiln::Error from translation units built without RTTI (the MLIR-facing
// ones). A `throw Error(...)` there makes the TU emit its own weak copy of Error's typeinfo;
// throwError throws from Error.cpp, where the typeinfo lives, so the library holds one
// definition of it (a sanitizer build's linker lost it among the weak copies).
#include <string>

#include "kiln/error.hpp"

namespace kiln::detail {

[[noreturn]] void throwError(ErrorKind kind, const std::string& message);

} // namespace kiln::detail
