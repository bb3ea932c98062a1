#include "PtxModules.h"

#include "Runtime/JsonInt.h"
#include "kiln/error.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace kiln::cuda {

std::string joinPtxModules(const PtxModules& modules, nlohmann::json& meta) {
  std::string payload = modules.first;
  if (!modules.twins.empty()) {
    nlohmann::json at = nlohmann::json::array();
    for (const std::string& ptx : modules.twins) {
      at.push_back(payload.size());
      payload += ptx;
    }
    meta["modules_at"] = at;
  }
  if (modules.portable) {
    meta["portable_at"] = payload.size();
    payload += *modules.portable;
  }
  return payload;
}

PtxModules splitPtxModules(const std::string& payload, const nlohmann::json& meta, bool isPtx,
                           const std::string& kernel) {
  // An empty module is no module: each start is past the one before and before the end.
  std::vector<size_t> starts = {0};
  auto startAt = [&](const nlohmann::json& j, const std::string& what) {
    if (!detail::isJsonInt<int64_t>(j))
      throw Error(ErrorKind::InvalidArgument,
                  "cache entry of kernel '" + kernel + "': the start of its " + what + " is not an integer");
    const int64_t at = j.get<int64_t>();
    if (!isPtx || at <= int64_t(starts.back()) || uint64_t(at) >= payload.size())
      throw Error(ErrorKind::InvalidArgument, "cache entry of kernel '" + kernel + "': its " + what +
                                                  " starts at byte " + std::to_string(at) + " of a " +
                                                  std::to_string(payload.size()) + "-byte " +
                                                  (isPtx ? "PTX" : "cubin") + " payload" +
                                                  (isPtx ? "" : " (a cubin is one module)"));
    starts.push_back(size_t(at));
  };
  if (meta.contains("modules_at")) {
    const nlohmann::json& at = meta.at("modules_at");
    if (!at.is_array())
      throw Error(ErrorKind::InvalidArgument, "cache entry of kernel '" + kernel + "': modules_at is not a list");
    for (size_t i = 0; i < at.size(); ++i) startAt(at[i], "twin module " + std::to_string(i + 2));
  }
  const size_t twinModules = starts.size();
  if (meta.contains("portable_at")) startAt(meta.at("portable_at"), "portable kernel's module");
  starts.push_back(payload.size());
  auto part = [&](size_t i) { return payload.substr(starts[i], starts[i + 1] - starts[i]); };
  PtxModules out;
  out.first = part(0);
  for (size_t i = 1; i < twinModules; ++i) out.twins.push_back(part(i));
  if (meta.contains("portable_at")) out.portable = part(twinModules);
  return out;
}

namespace {

/// One module-scope statement of a PTX module, comments dropped.
struct PtxStatement {
  enum Kind { Header, Declaration, Entry } kind;
  std::string text;
};

/// The statements at module scope: header lines (.version, .target, .address_size: no
/// semicolon), declarations ending in ';', and entries (through the '}' closing their
/// body). Nothing for anything else.
std::optional<std::vector<PtxStatement>> moduleStatements(const std::string& ptx) {
  std::vector<PtxStatement> out;
  size_t i = 0;
  const size_t n = ptx.size();
  auto skipSpaceAndComments = [&] {
    for (;;) {
      while (i < n && std::isspace(static_cast<unsigned char>(ptx[i]))) ++i;
      if (ptx.compare(i, 2, "//") == 0) {
        i = ptx.find('\n', i);
        if (i == std::string::npos) i = n;
      } else if (ptx.compare(i, 2, "/*") == 0) {
        const size_t end = ptx.find("*/", i + 2);
        if (end == std::string::npos) return false;
        i = end + 2;
      } else {
        return true;
      }
    }
  };
  auto startsWith = [&](const char* word) { return ptx.compare(i, std::strlen(word), word) == 0; };
  while (true) {
    if (!skipSpaceAndComments()) return std::nullopt;
    if (i == n) return out;
    const size_t from = i;
    if (startsWith(".version") || startsWith(".target") || startsWith(".address_size")) {
      i = ptx.find('\n', i);
      if (i == std::string::npos) i = n;
      out.push_back({PtxStatement::Header, ptx.substr(from, i - from)});
    } else if (startsWith(".visible .entry") || startsWith(".entry")) {
      // To the '}' closing the body; braces in comments do not count, and a ';' before
      // the body would make this a prototype, which kiln never emits.
      int depth = 0;
      bool body = false;
      while (i < n && !(body && depth == 0)) {
        if (ptx.compare(i, 2, "//") == 0 || ptx.compare(i, 2, "/*") == 0) {
          if (!skipSpaceAndComments()) return std::nullopt;
          continue;
        }
        const char c = ptx[i++];
        if (c == ';' && !body) return std::nullopt;
        if (c == '{') ++depth, body = true;
        if (c == '}' && --depth < 0) return std::nullopt;
      }
      if (!body || depth != 0) return std::nullopt;
      out.push_back({PtxStatement::Entry, ptx.substr(from, i - from)});
    } else if (ptx[i] == '.') {
      const size_t end = ptx.find(';', i);
      if (end == std::string::npos) return std::nullopt;
      const std::string text = ptx.substr(from, end + 1 - from);
      if (text.find('{') != std::string::npos || text.find("//") != std::string::npos) return std::nullopt;
      i = end + 1;
      out.push_back({PtxStatement::Declaration, text});
    } else {
      return std::nullopt;
    }
  }
}

} // namespace

std::optional<std::string> joinForJit(const std::string& first, const std::vector<std::string>& more) {
  std::optional<std::vector<PtxStatement>> base = moduleStatements(first);
  if (!base) return std::nullopt;
  std::vector<std::string> headers, declared;
  for (const PtxStatement& s : *base) {
    if (s.kind == PtxStatement::Header) headers.push_back(s.text);
    if (s.kind == PtxStatement::Declaration) declared.push_back(s.text);
  }
  std::string out = first;
  if (!out.empty() && out.back() != '\n') out += '\n';
  for (const std::string& ptx : more) {
    std::optional<std::vector<PtxStatement>> statements = moduleStatements(ptx);
    if (!statements) return std::nullopt;
    std::vector<std::string> ownHeaders;
    for (const PtxStatement& s : *statements) {
      switch (s.kind) {
      case PtxStatement::Header:
        ownHeaders.push_back(s.text);
        break;
      case PtxStatement::Declaration:
        // Declared alike in first: one declaration serves both. Any other is the
        // module's own, and could clash with a name of first's.
        if (std::find(declared.begin(), declared.end(), s.text) == declared.end()) return std::nullopt;
        break;
      case PtxStatement::Entry:
        out += "\n" + s.text + "\n";
        break;
      }
    }
    if (ownHeaders != headers) return std::nullopt;
  }
  return out;
}

} // namespace kiln::cuda
