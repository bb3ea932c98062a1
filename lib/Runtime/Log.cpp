#include "Runtime/Log.h"

// spdlog and fmt compiled into this file alone (header-only: no libspdlog/libfmt at run
// time), and hidden by kiln.map like the rest of the library's insides: an engine with its
// own spdlog of another version sees none of these symbols.
#ifndef FMT_HEADER_ONLY
#define FMT_HEADER_ONLY
#endif
#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

namespace kiln {

namespace {

spdlog::level::level_enum toSpd(LogLevel l) {
  switch (l) {
  case LogLevel::trace: return spdlog::level::trace;
  case LogLevel::debug: return spdlog::level::debug;
  case LogLevel::info: return spdlog::level::info;
  case LogLevel::warn: return spdlog::level::warn;
  case LogLevel::error: return spdlog::level::err;
  case LogLevel::off: break;
  }
  return spdlog::level::off;
}
LogLevel fromSpd(spdlog::level::level_enum l) {
  switch (l) {
  case spdlog::level::trace: return LogLevel::trace;
  case spdlog::level::debug: return LogLevel::debug;
  case spdlog::level::info: return LogLevel::info;
  case spdlog::level::warn: return LogLevel::warn;
  case spdlog::level::err:
  case spdlog::level::critical: return LogLevel::error;
  default: return LogLevel::off;
  }
}

/// The logger's one sink: the engine's LogSink when it set one, else stderr. base_sink's
/// mutex serialises both the messages and a change of route.
class RoutedSink final : public spdlog::sinks::base_sink<std::mutex> {
public:
  void route(LogSink sink) {
    std::lock_guard<std::mutex> lock(mutex_);
    user_ = std::move(sink);
  }

protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (user_) {
      try {
        user_(fromSpd(msg.level), std::string_view(msg.payload.data(), msg.payload.size()));
      } catch (...) { // the engine's sink failed: the message is lost, the work goes on
      }
      return;
    }
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
  void flush_() override {
    if (!user_) std::fflush(stderr);
  }

private:
  LogSink user_;
};

struct Logger {
  std::shared_ptr<RoutedSink> sink = std::make_shared<RoutedSink>();
  spdlog::logger logger{"kiln", sink};
  std::string badEnv; ///< $KILN_LOG when it named no level (said once, at the first message)
  std::once_flag saidBadEnv;
  Logger() {
    // "kiln: warning: text": the prefix kiln's messages have always had.
    logger.set_pattern("kiln: %l: %v");
    logger.flush_on(spdlog::level::trace); // a message is out before the next line of work
    LogLevel level = LogLevel::warn;
    if (const char* e = std::getenv("KILN_LOG"); e && *e) {
      if (auto l = parse_log_level(e)) level = *l;
      else badEnv = e;
    }
    logger.set_level(toSpd(level));
  }
};

Logger& instance() {
  // Never destroyed: a message from another static's destructor at exit still has a logger.
  static Logger* l = new Logger();
  return *l;
}

} // namespace

const char* to_string(LogLevel level) {
  switch (level) {
  case LogLevel::trace: return "trace";
  case LogLevel::debug: return "debug";
  case LogLevel::info: return "info";
  case LogLevel::warn: return "warn";
  case LogLevel::error: return "error";
  case LogLevel::off: return "off";
  }
  return "?";
}

std::optional<LogLevel> parse_log_level(std::string_view word) {
  for (LogLevel l : {LogLevel::trace, LogLevel::debug, LogLevel::info, LogLevel::warn, LogLevel::error, LogLevel::off})
    if (word == to_string(l)) return l;
  if (word == "warning") return LogLevel::warn;
  return std::nullopt;
}

LogLevel log_level() { return fromSpd(instance().logger.level()); }
void set_log_level(LogLevel level) { instance().logger.set_level(toSpd(level)); }
void set_log_sink(LogSink sink) { instance().sink->route(std::move(sink)); }

namespace detail {

void log(LogLevel level, std::string_view message) noexcept {
  try {
    Logger& l = instance();
    if (!l.badEnv.empty())
      std::call_once(l.saidBadEnv, [&] {
        l.logger.log(spdlog::level::warn, "KILN_LOG is '{}'; expected trace, debug, info, warn, error or off (using warn)",
                     l.badEnv);
      });
    if (level == LogLevel::off) return;
    l.logger.log(toSpd(level), spdlog::string_view_t(message.data(), message.size()));
  } catch (...) { // out of memory formatting a message: drop it
  }
}

} // namespace detail

} // namespace kiln
