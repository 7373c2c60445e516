// What a program reads and what it writes, checked against each other
// before it writes anything: every output can be written, no output is a
// directory where a file is meant, no output lands on an input (or inside
// an input directory whose every file is read) or on another output. Paths
// are compared after resolving symbolic links, and existing files by device
// and inode (hard links), so `--out ./d.st` and a link to d.st count as
// d.st. ddp_train (launch/output_paths.h) and every tool in tools/ check so.
#pragma once

#include <string>
#include <vector>

#include "runtime/status.h"

namespace ddp {

// One path a program uses: the flag that names it (or what it is, for a
// positional argument), the path, and whether it is a directory. An input
// directory with `contents` set is read whole (an image folder, a
// checkpoint's step directory): no output may land inside it.
struct PathUse {
  std::string flag;
  std::string path;
  bool directory = false;
  bool contents = false;
};

// `path` can be written later: its directory exists and is writable, it is
// not a directory itself, and where it exists it is writable.
Status CheckWritableFile(const std::string& flag, const std::string& path);

// Every output file writable (CheckWritableFile), none on an input, inside
// an input read whole, or on another output. One error names both flags
// and the path. An output with the same flag as an input (a resumed
// checkpoint directory) is read and written by design.
Status CheckOutputPaths(const std::vector<PathUse>& inputs, const std::vector<PathUse>& outputs);

}  // namespace ddp
