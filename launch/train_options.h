// ddp_train's command line (DESIGN.md's contract): gflags definitions, the
// --config file that can set any of them, and validation into TrainOptions.
// Every user mistake becomes one Status message naming the flag or file.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/dtype.h"
#include "runtime/optim/lr_schedule.h"
#include "runtime/status.h"

namespace ddp {

struct TrainOptions {
  std::string model;
  // --device as given (auto, cpu, cuda); ddp_train replaces it with the
  // device chosen for the rank ("cpu", "cuda:1").
  std::string device = "auto";
  // The CUDA device this rank trains on, or -1 for the CPU: ddp_train's
  // device binding sets it.
  int gpu = -1;
  // --precision: fp32, tf32 (GPU), fp16, bf16; --deterministic (GPU).
  std::string precision = "fp32";
  bool deterministic = false;
  // --comm: auto, nccl or mpi; ddp_train resolves auto for the device.
  std::string comm = "auto";
  int64_t batch_size = 0, accumulation_steps = 1;
  int64_t steps = 0, epochs = 0;  // exactly one is positive
  uint64_t seed = 1;
  int threads = 0;  // 0: the machine's cores

  std::string optimizer;  // sgd, adamw
  // lr 0: Goyal et al.'s linear scaling rule, 0.1 x global batch / 256.
  double lr = 0.0, momentum = 0.9, weight_decay = 0.0;
  bool nesterov = false, decay_bn_bias = true;
  LrSchedule schedule;  // base_lr, warmup and kind; total_steps is set once data is known
  double label_smoothing = 0.0, clip_grad_norm = 0.0;

  std::string data, eval_data;
  int64_t eval_every = 0;
  bool shuffle = true;
  int64_t image_size = 224, num_classes = 1000;
  bool zero_init_residual = false;

  std::string load_weights, save_weights, metrics_file;

  // Data parallelism.
  double bucket_mb = 25.0, first_bucket_mb = 1.0;
  bool overlap = true;
  int zero_stage = 0;  // 0: plain data parallelism; 1: optimizer state sharded; 2: gradients too
  DType wire_dtype = DType::kF32;  // --grad-compression none | fp16 | bf16
};

// Applies --config (a TrainConfig in protobuf text format): each field it
// sets becomes the flag of that name, unless the command line set the flag.
Status ApplyConfigFile();
// Reads and checks every flag.
StatusOr<TrainOptions> ReadTrainOptions();

}  // namespace ddp
