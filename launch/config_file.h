// --config: a TrainConfig (launch/train_config.proto) in protobuf text
// format, whose fields stand in for the flags of the same names.
#pragma once

#include "runtime/status.h"

namespace ddp {

// Applies --config: each field it sets becomes the flag of that name, unless
// the command line set the flag. One line naming the file and the line, the
// field or the value at fault.
Status ApplyConfigFile();

}  // namespace ddp
