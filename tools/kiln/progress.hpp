#pragma once
// The CLI's progress bar on stderr (the library itself never writes there: it reports
// progress through callbacks such as tune::Options::progress). On a terminal one line
// redrawn in place; into a file or pipe, a line per step.
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <string>

class ProgressBar {
public:
  explicit ProgressBar(bool on) : on_(on), tty_(::isatty(2)) {}
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  /// `done` of `total` steps; `label` says what the step was. Safe from several threads.
  void show(const std::string& label, int done, int total) {
    if (!on_) return;
    std::lock_guard<std::mutex> lock(mu_);
    const int width = 24, filled = total > 0 ? width * done / total : width;
    std::fprintf(stderr, "%s[%s%s] %d/%d %-40s%s", tty_ ? "\r" : "", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), done, total, label.c_str(), tty_ ? "" : "\n");
    open_ = tty_ && done < total;
    if (tty_ && done >= total) std::fputc('\n', stderr);
    std::fflush(stderr);
  }
  /// Ends a bar left mid-line on a terminal.
  ~ProgressBar() {
    if (open_) std::fputc('\n', stderr);
  }

private:
  bool on_, tty_, open_ = false;
  std::mutex mu_;
};
