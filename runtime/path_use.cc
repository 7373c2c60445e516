#include "runtime/path_use.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ddp {
namespace {

std::string Parent(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

std::string Base(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// How a path is told apart from others: the real path (links resolved;
// for a path not yet made, its directory's real path and its name), and
// for an existing file its device and inode.
struct Identity {
  std::string real;
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
};

Identity IdentityOf(const std::string& path) {
  Identity id;
  char buffer[PATH_MAX];
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    id.exists = true;
    id.dev = st.st_dev;
    id.ino = st.st_ino;
  }
  if (::realpath(path.c_str(), buffer) != nullptr) {
    id.real = buffer;
  } else if (::realpath(Parent(path).c_str(), buffer) != nullptr) {
    id.real = std::string(buffer) + "/" + Base(path);
  } else {
    id.real = path;
  }
  while (id.real.size() > 1 && id.real.back() == '/') id.real.pop_back();
  return id;
}

bool Same(const Identity& a, const Identity& b) {
  if (a.exists && b.exists) return a.dev == b.dev && a.ino == b.ino;
  return a.real == b.real;
}

// `path` lies under the directory `dir` (both real paths).
bool Inside(const Identity& path, const Identity& dir) {
  const std::string prefix = dir.real == "/" ? "/" : dir.real + "/";
  return path.real.compare(0, prefix.size(), prefix) == 0 && path.real.size() > prefix.size();
}

}  // namespace

Status CheckWritableFile(const std::string& flag, const std::string& path) {
  if (path.empty()) return Status::Ok();
  const std::string dir = Parent(path);
  if (::access(dir.c_str(), F_OK) != 0) {
    return FailedPrecondition(flag + " " + path + ": directory " + dir + " does not exist");
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return FailedPrecondition(flag + " " + path + ": directory " + dir + " is not writable");
  }
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return FailedPrecondition(flag + " " + path + " is a directory; give a file's path");
  }
  if (::access(path.c_str(), F_OK) == 0 && ::access(path.c_str(), W_OK) != 0) {
    return FailedPrecondition(flag + " " + path + " exists and is not writable");
  }
  return Status::Ok();
}

Status CheckOutputPaths(const std::vector<PathUse>& inputs, const std::vector<PathUse>& outputs) {
  for (const PathUse& out : outputs) {
    if (!out.directory) RETURN_IF_ERROR(CheckWritableFile(out.flag, out.path));
  }
  std::vector<Identity> ids;
  for (const PathUse& out : outputs) ids.push_back(IdentityOf(out.path));
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (const PathUse& in : inputs) {
      // A resumed checkpoint directory is read and written by design.
      if (in.flag == outputs[i].flag) continue;
      const Identity input = IdentityOf(in.path);
      if (Same(ids[i], input)) {
        return InvalidArgument(outputs[i].flag + " " + outputs[i].path + " is the " + in.flag + " " +
                               (in.directory ? "directory" : "file") + " " + in.path +
                               ": writing it would destroy the input; choose another path");
      }
      if (in.contents && Inside(ids[i], input)) {
        return InvalidArgument(outputs[i].flag + " " + outputs[i].path + " is inside the " + in.flag + " " +
                               in.path + ", which is read whole: writing there would change the input; choose "
                               "another path");
      }
    }
    for (size_t j = 0; j < i; ++j) {
      if (Same(ids[i], ids[j])) {
        return InvalidArgument(outputs[j].flag + " and " + outputs[i].flag + " are both " + outputs[i].path +
                               ": one would overwrite the other; give each its own path");
      }
    }
  }
  return Status::Ok();
}

}  // namespace ddp
