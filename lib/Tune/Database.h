#pragma once
// Internal: the tuning database's format (format 1), read from bytes and checked so that
// everything the tuner later reads from it has the type it expects. A file that is not
// one is refused whole, never overwritten: it may be someone's only copy of a search.
#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "kiln/runtime.hpp"
#include "kiln/tune.hpp"

namespace kiln::tune::detail {

/// Larger than any database a search writes (an entry is about a kilobyte).
inline constexpr std::size_t kMaxDatabaseBytes = std::size_t(64) << 20;

/// The database in `text` (read from `path`, named in errors). Every entry has string
/// `signature` and `shape_class`, an object `fingerprint` whose known fields have their
/// types (strings; `sm_count` an int), and `chosen.config` of int64 values. Throws
/// kiln::Error(InvalidArgument) naming the file and the first broken rule; nothing else.
nlohmann::json parseDatabase(const std::string& text, const std::string& path);

/// Reads `path` (bounded) and parses it; a missing file is an empty database.
nlohmann::json loadDatabase(const std::string& path);

/// Fields of a checked entry: never throw on what parseDatabase accepted.
nlohmann::json toJson(const Fingerprint& f);
Fingerprint fingerprintFrom(const nlohmann::json& j);
Config configFrom(const nlohmann::json& j);

} // namespace kiln::tune::detail
