#pragma once
// The benchmarks' CSV files: one row per process, appended, so runs in a loop (fresh
// processes) build one table. The header is written only into an empty or new file.
#include <fstream>
#include <string>

inline void appendCsvRow(const std::string& path, const std::string& header, const std::string& row) {
  if (path.empty()) return;
  std::ifstream probe(path);
  const bool fresh = !probe.good() || probe.peek() == std::ifstream::traits_type::eof();
  std::ofstream out(path, std::ios::app);
  if (fresh) out << header;
  out << row;
}
