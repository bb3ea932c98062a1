// LLVM ends the process on a fatal error (report_fatal_error: exit(1), or abort() after a
// crash report) and when an allocation fails. Inside an engine's process neither may
// happen: kiln's handlers throw kiln::Error instead, which reaches the caller of the
// compile like any other failure. libkiln.so keeps its LLVM private (--exclude-libs and a
// version script), so these handlers are kiln's own and never replace an engine's.
#include "Compiler/LlvmErrors.h"
#include "Runtime/Throw.h"

#include "kiln/error.hpp"

#include "llvm/Support/ErrorHandling.h"

#include <mutex>
#include <string>

namespace kiln::detail {

namespace {
// LLVM is built without exceptions: the frames between the failing call and kiln's catch
// run no destructors, so what that compile held is lost (a leak, not a crash). Its
// context is its own: a later compile starts from a fresh one.
[[noreturn]] void onFatal(void*, const char* reason, bool) {
  throwError(ErrorKind::CompileFailed, std::string("LLVM reported a fatal error: ") + reason +
                                            " (kiln stopped this compile; the process carries on)");
}
[[noreturn]] void onBadAlloc(void*, const char* reason, bool) {
  throwError(ErrorKind::CompileFailed, std::string("LLVM ran out of memory: ") + reason +
                                            " (kiln stopped this compile; the process carries on)");
}
} // namespace

void installLlvmErrorHandlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::install_fatal_error_handler(onFatal, nullptr);
    llvm::install_bad_alloc_error_handler(onBadAlloc, nullptr);
  });
}

} // namespace kiln::detail
