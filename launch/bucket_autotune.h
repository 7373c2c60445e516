// --bucket-mb auto: the bucket size the scaling model (comm/scaling_model.h)
// predicts best for this job, from a short profile of this rank's forward
// and backward and a probe of the communicator's all-reduce. Every rank
// profiles and probes; rank 0 chooses and broadcasts, so every rank builds
// the same buckets. It runs before the reducer and the optimizer state
// exist (under ZeRO the buckets are the optimizer state's layout), touches
// no data stream or random state (draws are pure functions of the seed, the
// step and the sample), and restores the model's buffers (batch norm's
// running statistics) after its passes.
#pragma once

#include <string>

#include "comm/communicator.h"
#include "runtime/batch.h"
#include "runtime/execution_context.h"
#include "runtime/layers/model.h"
#include "runtime/status.h"

namespace ddp {

struct BucketAutoOptions {
  double first_bucket_mb = 1.0;
  int zero_stage = 0;
  double wire_scale = 1.0;  // bytes on the wire per gradient byte (compression)
  int passes = 3;           // forward + backward passes; the first is not timed
  bool gpu = false;         // time with CUDA events on ctx's stream
};

struct BucketChoice {
  double bucket_mb = 25.0;
  std::string why;  // one line: the choice, its predicted step, the default's, the probe
};

// Collective: every rank calls it with its own first micro-batch.
StatusOr<BucketChoice> ChooseBucketMb(Communicator* comm, Model* model, ExecutionContext& ctx, const Batch& batch,
                                      const BucketAutoOptions& options);

}  // namespace ddp
