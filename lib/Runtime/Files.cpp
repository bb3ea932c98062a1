#include "kiln/files.hpp"

#include "kiln/error.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kiln {

namespace {

/// Closes the descriptor on every way out, exceptions included.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string named(const std::string& what, const std::string& path) { return what + " '" + path + "'"; }

} // namespace

std::string read_file(const std::string& path, const std::string& what, std::size_t max_bytes) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) {
    const int e = errno;
    if (e == ENOENT || e == ENOTDIR) throw Error(ErrorKind::NotFound, named(what, path) + " does not exist");
    throw Error(ErrorKind::Runtime, "cannot open " + named(what, path) + ": " + std::strerror(e));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) == 0 && S_ISDIR(st.st_mode))
    throw Error(ErrorKind::InvalidArgument, named(what, path) + " is a directory; name a file");
  // Read to the end, but never past the bound: pipes and devices have no size to trust.
  std::string out;
  char buf[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorKind::Runtime, "cannot read " + named(what, path) + ": " + std::strerror(errno));
    }
    if (out.size() + std::size_t(n) > max_bytes)
      throw Error(ErrorKind::InvalidArgument, named(what, path) + " is larger than " + std::to_string(max_bytes) +
                                                  " bytes (or never ends): not a file kiln wrote");
    out.append(buf, std::size_t(n));
  }
  return out;
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

} // namespace kiln
