// ddp_train --help: its own flags, grouped as the command-line contract
// groups them (what runs, how long, optimizer, data, distributed, files,
// observability), each with its default. glog's and gflags' own flags stay
// behind --helpfull.
#pragma once

#include <string>
#include <vector>

namespace ddp {

struct FlagGroup {
  const char* title;
  std::vector<const char*> flags;  // gflags names (underscores)
};

// Every group, in the order --help prints them.
const std::vector<FlagGroup>& FlagGroups();

// The help text: `usage`, then each group's flags as "  --batch-size=8
// samples per rank per micro-batch". Only flags defined in `files` (ends
// of source paths, e.g. "launch/train_options.cc") are ddp_train's own.
std::string GroupedHelp(const std::string& usage, const std::vector<std::string>& files);

// ddp_train's own flags (from `files`) that no group names, and names in a
// group that are no flag: both empty when the table is whole.
std::vector<std::string> UngroupedFlags(const std::vector<std::string>& files);
std::vector<std::string> UnknownGroupedFlags();

}  // namespace ddp
