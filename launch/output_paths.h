// What a run reads and what it writes, checked against each other before
// training (rank 0): every output can be written, no output is a directory
// where a file is meant, no output lands on an input (the dataset, the
// weights, the config) or on another output. Paths are compared after
// resolving symbolic links, and existing files by device and inode (hard
// links), so `--save-weights ./d.st` and a link to d.st count as d.st.
#pragma once

#include <string>
#include <vector>

#include "launch/train_options.h"
#include "runtime/status.h"

namespace ddp {

// One path a run uses: the flag that names it, the path, and whether it is
// a directory (--checkpoint-dir, --tensorboard-dir, imagefolder:DIR).
struct PathUse {
  std::string flag;
  std::string path;
  bool directory = false;
};

// The files and directories `options` reads: --data and --eval-data's
// files (tensors:, imagefolder:, tokens:), --load-weights, --config, and a
// resumed --checkpoint-dir.
std::vector<PathUse> InputPaths(const TrainOptions& options);
// The files and directories rank 0 writes.
std::vector<PathUse> OutputPaths(const TrainOptions& options);

// `path` can be written later: its directory exists and is writable, it is
// not a directory itself, and where it exists it is writable.
Status CheckWritableFile(const std::string& flag, const std::string& path);

// Every output file writable (CheckWritableFile), none on an input or on
// another output. One error names both flags and the path.
Status CheckOutputPaths(const std::vector<PathUse>& inputs, const std::vector<PathUse>& outputs);

}  // namespace ddp
