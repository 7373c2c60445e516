// Files that survive a crash at any moment: written whole, fsynced, and put
// in place by rename (POSIX rename within a filesystem is atomic), with the
// parent directory fsynced so the rename itself is durable. Checkpoints are
// built on these. CRC-32 (zlib's, as Python's zlib.crc32) checks contents.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/status.h"

namespace ddp {

// CRC-32 (IEEE, zlib's) of `n` bytes, continuing from `crc` (0 to start).
uint32_t Crc32(const void* data, size_t n, uint32_t crc = 0);

// Creates or truncates `path`, writes `bytes`, fsyncs and closes it. Errors
// name the path and the system's reason.
Status WriteFileDurably(const std::string& path, const std::string& bytes);
// The whole file, read up to its size; NotFound where it does not exist,
// InvalidArgument for a directory, device, FIFO or socket.
StatusOr<std::string> ReadWholeFile(const std::string& path);
// fsync of a directory: makes the entries created or renamed in it durable.
Status SyncDirectory(const std::string& path);
// Creates `path` (and missing parents), like mkdir -p.
Status MakeDirectories(const std::string& path);
// rename(from, to), then fsync of `to`'s parent directory. `to` must not be
// a non-empty directory.
Status RenameDurably(const std::string& from, const std::string& to);
// Replaces the small file `path` atomically: writes `path`.tmp durably and
// renames it over `path`.
Status ReplaceFileAtomically(const std::string& path, const std::string& bytes);
// Removes `path` and everything under it (no error when it does not exist).
Status RemoveTree(const std::string& path);
// The names of `dir`'s entries (not . and ..), sorted; empty when `dir`
// does not exist.
std::vector<std::string> ListDirectory(const std::string& dir);
// Whether `path` exists (any type).
bool PathExists(const std::string& path);

}  // namespace ddp
