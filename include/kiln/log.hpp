#pragma once
// kiln's messages: what the library tells its host process besides errors (a cache entry
// replaced, a CUDA handle that would not close, a GPU context reset). kiln never writes to
// stderr directly: every message goes through one logger, at a level, to a sink the engine
// may replace with its own (spdlog, glog, a ring buffer...). Errors are not messages: they
// are thrown as kiln::Error.
#include <functional>
#include <optional>
#include <string_view>

#include "kiln/export.hpp"

namespace kiln {

/// Most verbose first. A message is written when its level is at or above the logger's.
enum class LogLevel { trace, debug, info, warn, error, off };

/// "trace", "debug", "info", "warn", "error", "off".
KILN_API const char* to_string(LogLevel level);
/// The level a word names (the words to_string gives; "warning" too), or nullopt.
KILN_API std::optional<LogLevel> parse_log_level(std::string_view word);

/// The level in force. Until set_log_level is called it is $KILN_LOG's (read at the first
/// message or query; an unknown word there falls back to warn and says so once), else warn:
/// by default kiln says nothing unless something went wrong.
KILN_API LogLevel log_level();
/// Sets the level for the whole process (every Runtime), overriding $KILN_LOG.
KILN_API void set_log_level(LogLevel level);

/// Receives each message at or above the level: its level and its text (one line, no
/// prefix, no newline). Called from whichever thread logs, one call at a time (kiln
/// serialises them); it must not call back into kiln's logging. An exception it throws is
/// swallowed: a message never turns into a failure of the work that logged it.
using LogSink = std::function<void(LogLevel level, std::string_view message)>;
/// Routes kiln's messages to `sink` from now on, for the whole process; an empty sink
/// restores the default (stderr, each line "kiln: <level>: <text>").
KILN_API void set_log_sink(LogSink sink);

} // namespace kiln
