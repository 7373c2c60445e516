// Consolidates a ddp_train checkpoint, sharded by ZeRO or not, into one
// safetensors file for PyTorch: the model's parameters and buffers under
// their PyTorch names, and each parameter's optimizer state, whole and in
// the parameter's shape, as "optimizer.KIND.NAME" (KIND as PyTorch's:
// momentum_buffer; exp_avg, exp_avg_sq). Metadata: the step, the optimizer
// and its step count. Every file is checked against the manifest's size
// and CRC-32 first.
//   consolidate_checkpoint --checkpoint DIR --out FILE.safetensors
// DIR is a --checkpoint-dir (its newest checkpoint) or one step_NNNNNNNN
// directory in it.
#include <cstdio>

#include <gflags/gflags.h>

#include "launch/checkpointer.h"
#include "runtime/durable_files.h"
#include "runtime/path_use.h"
#include "tools/tool_main.h"

DEFINE_string(checkpoint, "", "a --checkpoint-dir (its newest checkpoint) or one of its step_NNNNNNNN directories");
DEFINE_string(out, "", "the safetensors file to write");

namespace ddp {
namespace {

Status Run() {
  if (FLAGS_checkpoint.empty() || FLAGS_out.empty()) {
    return InvalidArgument("usage: consolidate_checkpoint --checkpoint DIR --out FILE.safetensors");
  }
  StatusOr<CheckpointReader> reader = PathExists(FLAGS_checkpoint + "/manifest.pb")
                                          ? CheckpointReader::Open(FLAGS_checkpoint)
                                          : CheckpointReader::OpenLatest(FLAGS_checkpoint);
  RETURN_IF_ERROR(reader.status());
  // The step directory it reads is read whole: no output inside it.
  RETURN_IF_ERROR(CheckOutputPaths({{"--checkpoint", reader->path(), true, true}}, {{"--out", FLAGS_out}}));
  ASSIGN_OR_RETURN(SafetensorsContents model, ReadModelState(*reader));
  ASSIGN_OR_RETURN(const OptimizerStatePieces pieces, OptimizerStatePieces::Read(*reader));
  std::vector<NamedTensor> out = model.tensors;
  int64_t consolidated = 0;
  for (const std::string& kind : pieces.kinds()) {
    for (const NamedTensor& t : model.tensors) {
      // Buffers and tied duplicates have no state of their own.
      if (!pieces.Has(kind, t.name)) continue;
      ASSIGN_OR_RETURN(const Tensor values, pieces.Assemble(kind, t.name, 0, t.tensor.numel()));
      out.push_back({"optimizer." + kind + "." + t.name, values.View(0, t.tensor.shape())});
      ++consolidated;
    }
  }
  const CheckpointManifest& m = reader->manifest();
  RETURN_IF_ERROR(WriteSafetensors(FLAGS_out, out,
                                   {{"format", "pt"},
                                    {"model", m.model()},
                                    {"step", std::to_string(m.step())},
                                    {"optimizer", m.optimizer()},
                                    {"optimizer_steps", std::to_string(m.optimizer_steps())}}));
  std::printf("consolidate_checkpoint: %s (step %lld, %d rank%s, ZeRO stage %d) -> %s: %zu model tensors, %lld "
              "optimizer state tensors\n",
              reader->path().c_str(), static_cast<long long>(m.step()), m.world_size(), m.world_size() == 1 ? "" : "s",
              m.zero_stage(), FLAGS_out.c_str(), model.tensors.size(), static_cast<long long>(consolidated));
  return Status::Ok();
}

}  // namespace
}  // namespace ddp

int main(int argc, char** argv) {
  gflags::SetUsageMessage("consolidate_checkpoint --checkpoint DIR --out FILE.safetensors");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return ddp::RunTool("consolidate_checkpoint", ddp::Run);
}
