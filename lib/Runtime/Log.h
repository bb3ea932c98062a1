#pragma once
// Internal: how kiln's own code writes a message (kiln/log.hpp says where it goes). The one
// way out of the library for text that is not an Error: lib/ and backends/ never write to
// stderr or stdout themselves (test/embed/check-no-stderr.sh). No spdlog in this header:
// only Log.cpp pays for its templates.
#include <string_view>

#include "kiln/log.hpp"

namespace kiln::detail {

/// Writes `message` (one line, no "kiln:" prefix, no newline) at `level`. Never throws.
void log(LogLevel level, std::string_view message) noexcept;
inline void logWarn(std::string_view message) noexcept { log(LogLevel::warn, message); }
inline void logDebug(std::string_view message) noexcept { log(LogLevel::debug, message); }

} // namespace kiln::detail
