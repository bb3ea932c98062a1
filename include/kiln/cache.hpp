#pragma once
// The kernel cache: compiled kernels kept in memory (per Runtime) and on disk (shared by
// processes), so a service pays for a compile once per kernel, target and toolchain.
//
// Key: SHA-256 of the kernel's tile IR (as printed: no source locations), the backend and
// its compile options (arch, warps; the host CPU for the CPU backend), and the versions of
// kiln, LLVM/MLIR and the PTX compiler (nvJitLink, or the driver for its JIT) — never the
// process's history. Value: one file per entry, `<dir>/<key[0..1]>/<key>.kiln`: a JSON header
// (kernel, key inputs, register/shared-memory report, compile phase times, payload size and
// SHA-256) and the payload (the cubin, or the CPU object file). docs/cache.md.
//
// Guarantees: writes go to a temporary file renamed into place (atomic); a read checks the
// header and the payload's checksum, and an entry that fails (truncated, bit-flipped,
// foreign) is logged, recompiled and replaced — never loaded; several processes may compile
// into one directory at once; the directory is kept under a size limit by evicting the
// least recently used entries.
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/export.hpp"

namespace kiln {

enum class CacheOutcome {
  off,    ///< the cache was not consulted (caching disabled)
  miss,   ///< compiled now (and written to disk when the disk cache is on)
  memory, ///< this Runtime compiled the same kernel before: no work at all
  disk,   ///< loaded from the disk cache: no compile, only a module load
};
KILN_API const char* to_string(CacheOutcome o);

/// What the cache did for one Runtime::compile.
struct KILN_API CacheInfo {
  CacheOutcome outcome = CacheOutcome::off;
  std::string key;        ///< hex SHA-256; empty when off
  double lookup_ms = 0;   ///< key, memory and disk lookup (and the read on a disk hit)
  double load_ms = 0;     ///< disk hit: loading the cached code (module load / object link)
  double write_ms = 0;    ///< miss: writing the entry
  std::string note;       ///< e.g. "corrupt entry replaced: checksum mismatch"
};

/// Counters of one Runtime (a compile is a real compile: a miss).
struct KILN_API CacheStats {
  int64_t compiles = 0, memory_hits = 0, disk_hits = 0, disk_writes = 0;
  int64_t corrupt_entries = 0, evictions = 0, write_failures = 0;
};

namespace cache {

/// $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln.
KILN_API std::string default_dir();

struct KILN_API Entry {
  std::string key, kernel, backend, target;
  int64_t bytes = 0;       ///< file size
  double age_s = 0;        ///< since last use
  bool valid = false;      ///< header parses and the payload matches its checksum
  std::string problem;     ///< why not valid
};

/// Every entry in `dir`, most recently used first (checks each checksum).
KILN_API std::vector<Entry> list(const std::string& dir);
/// Removes every entry (and stale temporary files); returns how many entries went.
KILN_API int64_t clear(const std::string& dir);
/// Total bytes of the entries in `dir`.
KILN_API int64_t size_bytes(const std::string& dir);

} // namespace cache
} // namespace kiln
