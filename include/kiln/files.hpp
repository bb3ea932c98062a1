#pragma once
// Reading the files kiln parses (tuning databases, cache entries, reports), for kiln itself
// and for tools and engines that read them too.
#include <cstddef>
#include <string>

#include "kiln/export.hpp"

namespace kiln {

/// The most read_file reads by default: larger than any file kiln writes.
inline constexpr std::size_t kMaxFileBytes = std::size_t(256) << 20;

/// The whole of the file at `path`, read with a bound: a file larger than `max_bytes`, or a
/// device that never ends (/dev/zero, /dev/full), is an error, not unbounded memory.
/// `what` names the file in messages ("tuning database"). Throws kiln::Error: NotFound
/// when nothing is at `path`; InvalidArgument for a directory or more than `max_bytes`;
/// Runtime for any other failure to open or read (the system's reason in the message).
KILN_API std::string read_file(const std::string& path, const std::string& what,
                               std::size_t max_bytes = kMaxFileBytes);

/// Whether anything (a file, a directory, a device) is at `path`.
KILN_API bool path_exists(const std::string& path);

} // namespace kiln
