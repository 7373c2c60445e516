// The memory planner's flags (launch/memory_planner.h): --device meta plans
// instead of training, for a device, a world size and a budget.
#include <gflags/gflags.h>

#include "launch/train_options.h"
#include "runtime/byte_size.h"

DEFINE_string(plan_memory, "",
              "plan one rank's memory for a device of this size (e.g. 24GiB) on the meta device, without training: "
              "the largest --batch-size that fits, or, with --batch-size given, whether that one does; prints the "
              "breakdown and exits");
DEFINE_string(plan_device, "cuda",
              "the device a plan is for (--device meta, --plan-memory): cuda or cpu; its precisions, memory format "
              "and library workspaces");
DEFINE_int32(plan_world_size, 0,
             "the ranks a plan is for (their ZeRO shards and buckets); 0: the job's, as mpirun started it");
DEFINE_string(plan_overhead, "",
              "the device's memory outside tensors, which a plan adds to its peak (CUDA: the context, library "
              "kernels and NCCL's buffers; CPU: the process's code and libraries); empty: measured on a visible "
              "GPU, else 1GiB for cuda and 512MiB for cpu; 0 for none");

namespace ddp {

Status ReadPlanFlags(TrainOptions* options) {
  TrainOptions& o = *options;
  if (FLAGS_plan_device != "cuda" && FLAGS_plan_device != "cpu") {
    return InvalidArgument("--plan-device '" + FLAGS_plan_device + "' is unknown; use cuda or cpu");
  }
  o.plan_device = FLAGS_plan_device;
  if (FLAGS_plan_world_size < 0 || FLAGS_plan_world_size > 65536) {
    return InvalidArgument("--plan-world-size must be in [1, 65536], or 0 for the job's ranks; got " +
                           std::to_string(FLAGS_plan_world_size));
  }
  o.plan_world_size = FLAGS_plan_world_size;
  if (!FLAGS_plan_memory.empty()) {
    ASSIGN_OR_RETURN(o.plan_memory, ParseByteSize("--plan-memory", FLAGS_plan_memory));
    if (o.device == "auto") o.device = "meta";  // a plan runs on the meta device
    if (o.device != "meta") {
      return InvalidArgument("--plan-memory plans on the meta device, not --device " + o.device +
                             ": drop --device (--plan-device " + o.plan_device + " names the device planned for)");
    }
  }
  if (!FLAGS_plan_overhead.empty()) {
    ASSIGN_OR_RETURN(o.plan_overhead, ParseByteSize("--plan-overhead", FLAGS_plan_overhead, /*allow_zero=*/true));
  }
  gflags::CommandLineFlagInfo info;
  o.batch_size_given = gflags::GetCommandLineFlagInfo("batch_size", &info) && !info.is_default;
  if (o.device != "meta") return Status::Ok();
  // Meta tensors hold no values: nothing can be read into them or written
  // out of them, and nothing measured on them but bytes.
  const std::vector<std::pair<const char*, bool>> needs_values = {
      {"--load-weights", !o.load_weights.empty()},     {"--save-weights", !o.save_weights.empty()},
      {"--checkpoint-dir", !o.checkpoint_dir.empty()}, {"--eval-data", !o.eval_data.empty()},
      {"--predictions-file", !o.predictions_file.empty()},
      {"--tensorboard-dir", !o.tensorboard_dir.empty()}, {"--timeline", !o.timeline.empty()},
      {"--profile-file", !o.profile_file.empty()},     {"--contention-probe", !o.contention_probe.empty()},
      {"--bucket-mb auto", o.bucket_mb_auto},          {"--cuda-graphs", o.cuda_graphs}};
  for (const auto& [flag, given] : needs_values) {
    if (given) {
      return InvalidArgument(std::string("--device meta plans memory and computes no values: ") + flag +
                             " needs real ones; drop it for the plan");
    }
  }
  if (o.precision == "fp16" && o.plan_device == "cpu") {
    return InvalidArgument("--precision fp16 trains on GPUs only: plan it with --plan-device cuda");
  }
  if (o.precision == "tf32" && o.plan_device == "cpu") {
    return InvalidArgument("--precision tf32 is a GPU math mode: plan it with --plan-device cuda");
  }
  return Status::Ok();
}

}  // namespace ddp
