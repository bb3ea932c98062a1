#pragma once
// Internal, MLIR-free: the disk side of the kernel cache (include/kiln/cache.hpp): the
// entry file format, atomic writes, checked reads, LRU eviction.
//
// An entry file: "KILNCACHE1 <header bytes> <header sha256>\n", the header (JSON), "\n",
// the payload. The header holds payload_bytes and payload_sha256; a read that does not
// match either checksum or size, or whose header does not parse, is corrupt.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kiln::detail {

/// Lower-case hex SHA-256 of `data`.
std::string sha256Hex(const std::string& data);

struct CacheRecord {
  nlohmann::json header; ///< kernel, backend, target, key_inputs, meta, payload_*
  std::string payload;
};

class DiskCache {
public:
  /// `readOnly`: entries are read, never written, refreshed or removed (a cache shipped
  /// with a deploy, or a directory this process may not write: see isReadOnlyDir).
  DiskCache(std::string dir, int64_t maxBytes, bool readOnly = false)
      : dir_(std::move(dir)), maxBytes_(maxBytes), readOnly_(readOnly) {}
  const std::string& dir() const { return dir_; }
  bool readOnly() const { return readOnly_; }
  /// What becomes of an entry that cannot be used, for the warning that names it:
  /// "; recompiling and replacing it", or, read-only, that the entry is kept.
  const char* unusableEntry() const {
    return readOnly_ ? "; compiling the kernel here (the read-only cache keeps the entry)" : "; recompiling and replacing it";
  }
  std::string pathOf(const std::string& key) const; ///< <dir>/<key[0..1]>/<key>.kiln

  /// The entry for `key`, or nullopt. A corrupt entry is removed, `*problem` says why, and
  /// the result is nullopt. A hit refreshes the entry's last-use time (LRU).
  std::optional<CacheRecord> read(const std::string& key, std::string* problem) const;
  /// Writes atomically (temporary file, then rename). Returns false with `*error` set when
  /// the directory or file cannot be written; the cache is then only skipped.
  bool write(const std::string& key, nlohmann::json header, const std::string& payload, std::string* error) const;
  /// Removes least recently used entries until the total is at most the limit, sparing
  /// `keep`. Returns how many were removed.
  int64_t evict(const std::string& keep) const;

private:
  std::string dir_;
  int64_t maxBytes_;
  bool readOnly_;
};

/// Whether `dir` exists and this process may not write in it (access(2): a read-only mount,
/// or permissions). A directory that does not exist yet is not read-only: kiln makes it.
bool isReadOnlyDir(const std::string& dir);

/// Parses an entry file's bytes; nullopt with `*problem` when malformed or not matching
/// its checksum.
std::optional<CacheRecord> parseEntry(const std::string& bytes, std::string* problem);

} // namespace kiln::detail
