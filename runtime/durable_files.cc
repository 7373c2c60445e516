#include "runtime/durable_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ddp {
namespace {

Status Errno(const std::string& what, const std::string& path) {
  return Status(StatusCode::kInternal, what + " " + path + ": " + std::strerror(errno));
}

std::string ParentOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

uint32_t Crc32(const void* data, size_t n, uint32_t crc) {
  const unsigned char* bytes = static_cast<const unsigned char*>(data);
  // zlib takes lengths as uInt: feed it in chunks below 4 GiB.
  constexpr size_t kChunk = size_t{1} << 30;
  uLong value = crc;
  while (n > 0) {
    const size_t take = std::min(n, kChunk);
    value = crc32(value, bytes, static_cast<uInt>(take));
    bytes += take;
    n -= take;
  }
  return static_cast<uint32_t>(value);
}

Status WriteFileDurably(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", path);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const Status error = Errno("cannot write", path);
      ::close(fd);
      return error;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const Status error = Errno("cannot fsync", path);
    ::close(fd);
    return error;
  }
  if (::close(fd) != 0) return Errno("cannot close", path);
  return Status::Ok();
}

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  // Non-blocking: a FIFO with no writer is refused below, not waited on.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return Status(errno == ENOENT ? StatusCode::kNotFound : StatusCode::kInternal,
                            "cannot open " + path + ": " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const Status error = Errno("cannot stat", path);
    ::close(fd);
    return error;
  }
  // Only a regular file has a size to read up to: /dev/zero, /dev/urandom
  // or a pipe would be read until memory runs out.
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(path + (S_ISDIR(st.st_mode) ? " is a directory, not a file"
                                                       : " is not a regular file (a device, FIFO or socket)"));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, &bytes[done], bytes.size() - done);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) {
      const Status error = Errno("cannot read", path);
      ::close(fd);
      return error;
    }
    if (n == 0) break;  // shrunk while read
    done += static_cast<size_t>(n);
  }
  bytes.resize(done);
  ::close(fd);
  return bytes;
}

Status SyncDirectory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open directory", path);
  const int synced = ::fsync(fd);
  const Status error = synced != 0 ? Errno("cannot fsync directory", path) : Status::Ok();
  ::close(fd);
  return error;
}

Status MakeDirectories(const std::string& path) {
  if (path.empty()) return Status::Ok();
  std::string at;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = path.find('/', start);
    const size_t end = slash == std::string::npos ? path.size() : slash;
    at = path.substr(0, end);
    start = end + 1;
    if (at.empty()) continue;  // the root
    if (::mkdir(at.c_str(), 0755) != 0 && errno != EEXIST) return Errno("cannot create directory", at);
    struct stat st;
    if (::stat(at.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return Status(StatusCode::kFailedPrecondition, at + " exists and is not a directory");
    }
    if (slash == std::string::npos) break;
  }
  return Status::Ok();
}

Status RenameDurably(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) return Errno("cannot rename " + from + " to", to);
  return SyncDirectory(ParentOf(to));
}

Status ReplaceFileAtomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  RETURN_IF_ERROR(WriteFileDurably(tmp, bytes));
  return RenameDurably(tmp, path);
}

Status RemoveTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return Errno("cannot stat", path);
  }
  if (S_ISDIR(st.st_mode)) {
    for (const std::string& name : ListDirectory(path)) RETURN_IF_ERROR(RemoveTree(path + "/" + name));
    if (::rmdir(path.c_str()) != 0) return Errno("cannot remove directory", path);
    return Status::Ok();
  }
  if (::unlink(path.c_str()) != 0) return Errno("cannot remove", path);
  return Status::Ok();
}

std::vector<std::string> ListDirectory(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const struct dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace ddp
