#include "Runtime/KernelCache.h"
#include "Runtime/Log.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <cctype>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include "kiln/cache.hpp"
#include "kiln/error.hpp"
#include "kiln/files.hpp"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SHA256.h"

namespace kiln::detail {

namespace {

constexpr const char* kMagic = "KILNCACHE1 ";

/// An entry's bytes; false where there is none. One that cannot be read (a directory in its
/// place, or more than any entry kiln writes) reads as empty: corrupt, and replaced.
bool readFile(const std::string& path, std::string& out) {
  try {
    out = read_file(path, "cache entry");
    return true;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::NotFound) return false;
    out.clear();
    return true;
  }
}

bool makeDirs(const std::string& path) {
  std::string cur;
  std::stringstream ss(path);
  for (std::string part; std::getline(ss, part, '/');) {
    cur += (cur.empty() && path[0] == '/' ? "/" : cur.empty() ? "" : "/") + part;
    if (part.empty()) continue;
    if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

struct FileInfo {
  std::string path;
  int64_t bytes = 0;
  int64_t mtimeNs = 0;
};

/// The cache root's marker (the CACHEDIR.TAG convention, so backup tools skip the cache too):
/// written with the first entry; without it kiln deletes nothing in a directory.
constexpr const char* kTagName = "CACHEDIR.TAG";
constexpr const char* kTag = "Signature: 8a477f597d28d172789f06886806bc55\n"
                             "# This directory is kiln's kernel cache: `kiln cache clear` empties it.\n";

bool isHex(const std::string& s, size_t from, size_t n) {
  if (s.size() < from + n) return false;
  for (size_t i = from; i < from + n; ++i)
    if (!std::isxdigit(static_cast<unsigned char>(s[i])) || std::isupper(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

/// The names kiln gives entries: <64 hex>.kiln in the shard named by their first two
/// characters; temporaries add .tmp.<pid>.<n>.
bool isEntryName(const std::string& shard, const std::string& n, bool temporary) {
  if (!isHex(n, 0, 64) || n.compare(0, 2, shard) != 0 || n.compare(64, 5, ".kiln") != 0) return false;
  return temporary ? n.compare(69, 5, ".tmp.") == 0 : n.size() == 69;
}

bool hasTag(const std::string& dir) {
  try {
    return read_file(dir + "/" + kTagName, "cache tag", 4096).find("kiln's kernel cache") != std::string::npos;
  } catch (const Error&) {
    return false;
  }
}

/// Whether the file begins with an entry's magic: a file kiln wrote, not one in its place.
bool hasMagic(const std::string& path) {
  char head[16] = {};
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = ::read(fd, head, std::strlen(kMagic));
  ::close(fd);
  return n == ssize_t(std::strlen(kMagic)) && std::memcmp(head, kMagic, size_t(n)) == 0;
}

// Every file named as an entry (and with `withTemporaries` as a temporary) one level below
// `dir`, in the two-character shards.
std::vector<FileInfo> entryFiles(const std::string& dir, bool withTemporaries = false) {
  std::vector<FileInfo> out;
  DIR* top = ::opendir(dir.c_str());
  if (!top) return out;
  while (dirent* shard = ::readdir(top)) {
    std::string s = shard->d_name;
    if (s.size() != 2 || !isHex(s, 0, 2)) continue;
    std::string sub = dir + "/" + s;
    DIR* d = ::opendir(sub.c_str());
    if (!d) continue;
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      bool entry = isEntryName(s, n, false);
      bool temp = isEntryName(s, n, true);
      if (!entry && !(withTemporaries && temp)) continue;
      struct stat st {};
      std::string p = sub + "/" + n;
      if (::stat(p.c_str(), &st) != 0) continue;
      out.push_back({p, int64_t(st.st_size), int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
    }
    ::closedir(d);
  }
  ::closedir(top);
  return out;
}

} // namespace

std::string sha256Hex(const std::string& data) {
  llvm::SHA256 h;
  h.update(llvm::StringRef(data));
  auto digest = h.final();
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (uint8_t b : digest) {
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

std::string DiskCache::pathOf(const std::string& key) const { return dir_ + "/" + key.substr(0, 2) + "/" + key + ".kiln"; }

std::optional<CacheRecord> parseEntry(const std::string& bytes, std::string* problem) {
  auto bad = [&](const std::string& why) -> std::optional<CacheRecord> {
    if (problem) *problem = why;
    return std::nullopt;
  };
  const size_t magicLen = std::string(kMagic).size();
  if (bytes.compare(0, magicLen, kMagic) != 0) return bad("not a kiln cache entry (bad magic)");
  size_t nl = bytes.find('\n', magicLen);
  if (nl == std::string::npos) return bad("truncated (no header line)");
  // "<digits> <64 hex>": nothing else is accepted (no sign, no spaces, no overflow).
  const size_t sp = bytes.find(' ', magicLen);
  if (sp == std::string::npos || sp > nl || sp == magicLen || sp - magicLen > 12 || nl - sp - 1 != 64)
    return bad("malformed first line");
  size_t headerLen = 0;
  for (size_t i = magicLen; i < sp; ++i) {
    if (bytes[i] < '0' || bytes[i] > '9') return bad("malformed first line");
    headerLen = headerLen * 10 + size_t(bytes[i] - '0');
  }
  const std::string headerSha = bytes.substr(sp + 1, 64);
  if (headerLen > bytes.size() - nl - 1 || bytes.size() - nl - 1 - headerLen < 1) return bad("truncated (header)");
  if (bytes[nl + 1 + headerLen] != '\n') return bad("no separator after the header");
  const std::string headerText = bytes.substr(nl + 1, headerLen);
  if (sha256Hex(headerText) != headerSha) return bad("header checksum mismatch");
  CacheRecord r;
  try {
    r.header = nlohmann::json::parse(headerText);
  } catch (const nlohmann::json::exception& e) {
    return bad(std::string("header is not JSON: ") + e.what());
  }
  r.payload = bytes.substr(nl + 1 + headerLen + 1);
  if (!r.header.is_object() || !r.header.value("payload_bytes", nlohmann::json()).is_number_integer() ||
      !r.header.value("payload_sha256", nlohmann::json()).is_string() ||
      !r.header.value("key", nlohmann::json()).is_string() || !r.header.value("meta", nlohmann::json()).is_object())
    return bad("header lacks key, meta, payload_bytes or payload_sha256 (another format?)");
  if (int64_t(r.payload.size()) != r.header["payload_bytes"].get<int64_t>())
    return bad("truncated (payload is " + std::to_string(r.payload.size()) + " bytes, header says " +
               std::to_string(r.header["payload_bytes"].get<int64_t>()) + ")");
  if (sha256Hex(r.payload) != r.header["payload_sha256"].get<std::string>()) return bad("payload checksum mismatch");
  return r;
}

std::optional<CacheRecord> DiskCache::read(const std::string& key, std::string* problem) const {
  const std::string path = pathOf(key);
  std::string bytes;
  if (!readFile(path, bytes)) return std::nullopt; // absent: a plain miss
  std::string why;
  auto r = parseEntry(bytes, &why);
  if (r && r->header["key"].get<std::string>() != key) {
    why = "entry is for another key";
    r.reset();
  }
  if (!r) {
    detail::logWarn("cache: " + path + ": " + why + unusableEntry());
    if (!readOnly_) ::unlink(path.c_str());
    if (problem) *problem = why;
    return std::nullopt;
  }
  if (!readOnly_) ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0); // last use, for LRU eviction
  return r;
}

bool isReadOnlyDir(const std::string& dir) {
  struct stat st;
  return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && ::access(dir.c_str(), W_OK) != 0;
}

bool DiskCache::write(const std::string& key, nlohmann::json header, const std::string& payload,
                      std::string* error) const {
  if (readOnly_) {
    if (error) *error = "the cache directory " + dir_ + " is read-only";
    return false;
  }
  const std::string path = pathOf(key);
  const std::string shard = path.substr(0, path.rfind('/'));
  if (!makeDirs(shard)) {
    if (error) *error = "cannot create " + shard;
    return false;
  }
  header["key"] = key;
  header["payload_bytes"] = int64_t(payload.size());
  header["payload_sha256"] = sha256Hex(payload);
  const std::string h = header.dump();
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rng());
  {
    std::ofstream out(tmp, std::ios::binary);
    out << kMagic << h.size() << " " << sha256Hex(h) << "\n" << h << "\n" << payload;
    out.close();
    if (!out) {
      ::unlink(tmp.c_str());
      if (error) *error = "cannot write " + tmp;
      return false;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) { // atomic: readers see the old entry or the new
    ::unlink(tmp.c_str());
    if (error) *error = "cannot rename " + tmp + " to " + path;
    return false;
  }
  const std::string tag = dir_ + "/" + kTagName;
  if (!path_exists(tag)) std::ofstream(tag) << kTag; // best effort: without it, nothing is deleted
  return true;
}

int64_t DiskCache::evict(const std::string& keep) const {
  if (readOnly_) return 0;
  // Temporary files older than ten minutes belong to processes that died mid-write.
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const int64_t nowNs = int64_t(now.tv_sec) * 1000000000 + now.tv_nsec;
  if (!hasTag(dir_)) return 0; // not provably kiln's directory: delete nothing
  for (const auto& f : entryFiles(dir_, /*withTemporaries=*/true))
    if (f.path.find(".kiln.tmp.") != std::string::npos && nowNs - f.mtimeNs > int64_t(600) * 1000000000)
      ::unlink(f.path.c_str());
  std::vector<FileInfo> files = entryFiles(dir_);
  int64_t total = 0;
  for (const auto& f : files) total += f.bytes;
  if (total <= maxBytes_) return 0;
  std::sort(files.begin(), files.end(), [](const FileInfo& a, const FileInfo& b) { return a.mtimeNs < b.mtimeNs; });
  const std::string keepPath = keep.empty() ? std::string() : pathOf(keep);
  int64_t removed = 0;
  for (const auto& f : files) {
    if (total <= maxBytes_) break;
    if (f.path == keepPath || !hasMagic(f.path)) continue;
    if (::unlink(f.path.c_str()) == 0) {
      total -= f.bytes;
      ++removed;
    }
  }
  return removed;
}

} // namespace kiln::detail

namespace kiln {

const char* to_string(CacheOutcome o) {
  switch (o) {
  case CacheOutcome::off: return "off";
  case CacheOutcome::miss: return "miss";
  case CacheOutcome::memory: return "memory";
  case CacheOutcome::disk: return "disk";
  }
  return "?";
}

namespace cache {

std::string default_dir() {
  if (const char* d = std::getenv("KILN_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/kiln";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/kiln";
  return ".kiln-cache";
}

std::vector<Entry> list(const std::string& dir) {
  std::vector<detail::FileInfo> files = detail::entryFiles(dir);
  std::sort(files.begin(), files.end(),
            [](const detail::FileInfo& a, const detail::FileInfo& b) { return a.mtimeNs > b.mtimeNs; });
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const int64_t nowNs = int64_t(now.tv_sec) * 1000000000 + now.tv_nsec;
  std::vector<Entry> out;
  for (const auto& f : files) {
    Entry e;
    std::string name = f.path.substr(f.path.rfind('/') + 1);
    e.key = name.substr(0, name.size() - 5);
    e.bytes = f.bytes;
    e.age_s = double(nowNs - f.mtimeNs) / 1e9;
    std::string bytes;
    if (detail::readFile(f.path, bytes)) {
      auto r = detail::parseEntry(bytes, &e.problem);
      if (r && r->header["key"].get<std::string>() != e.key) {
        e.problem = "entry is for another key";
        r.reset();
      }
      if (r) {
        e.valid = true;
        e.kernel = r->header.value("kernel", std::string());
        e.backend = r->header.value("backend", std::string());
        e.target = r->header.value("target", std::string());
      }
    } else {
      e.problem = "unreadable";
    }
    out.push_back(std::move(e));
  }
  return out;
}

int64_t clear(const std::string& dir) {
  // Only in a directory kiln tagged, only files named as entries that begin as entries do.
  if (!detail::hasTag(dir)) return 0;
  int64_t n = 0;
  for (const auto& f : detail::entryFiles(dir, /*withTemporaries=*/true)) {
    const bool entry = f.path.compare(f.path.size() - 5, 5, ".kiln") == 0;
    if (entry && !detail::hasMagic(f.path)) continue; // a temporary may be cut before its magic
    if (::unlink(f.path.c_str()) == 0 && entry) ++n;
  }
  return n;
}

int64_t size_bytes(const std::string& dir) {
  int64_t total = 0;
  for (const auto& f : detail::entryFiles(dir)) total += f.bytes;
  return total;
}

} // namespace cache
} // namespace kiln
