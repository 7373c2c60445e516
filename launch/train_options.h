// ddp_train's command line (DESIGN.md's contract): gflags definitions, the
// --config file that can set any of them, and validation into TrainOptions.
// Every user mistake becomes one Status message naming the flag or file.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/dtype.h"
#include "runtime/optim/loss_scaler.h"
#include "runtime/optim/lr_schedule.h"
#include "runtime/status.h"

namespace ddp {

struct TrainOptions {
  std::string model;
  // --device as given (auto, cpu, cuda, meta); ddp_train replaces it with
  // the device chosen for the rank ("cpu", "cuda:1"). "meta": a memory plan
  // (launch/memory_planner.h) instead of training.
  std::string device = "auto";
  // The plan's rank: its device (--plan-device cuda or cpu), its world
  // (--plan-world-size; 0: the job's), the budget (--plan-memory bytes; 0:
  // none, the breakdown at --batch-size only) and the device's memory
  // outside tensors (--plan-overhead; -1: the default). Whether
  // --batch-size was given: then a budget is checked at that batch.
  std::string plan_device = "cuda";
  int plan_world_size = 0;
  int64_t plan_memory = 0, plan_overhead = -1;
  bool batch_size_given = false;
  // The CUDA device this rank trains on, or -1 for the CPU: ddp_train's
  // device binding sets it.
  int gpu = -1;
  // --device-memory-limit: the most bytes this rank's device allocator
  // holds in tensors (0: no cap); past it, the out-of-memory line.
  int64_t device_memory_limit = 0;
  // --precision: fp32, tf32 (GPU), fp16, bf16; --deterministic (GPU).
  std::string precision = "fp32";
  bool deterministic = false;
  // --cuda-graphs: each step's micro-batches (forward, loss, backward and the
  // gradient all-reduces) are captured into a CUDA graph once and replayed.
  bool cuda_graphs = false;
  // --loss-scale (auto: dynamic for fp16, none otherwise) and
  // --loss-scale-growth-interval; --max-skipped-share: the share of steps
  // skipped for non-finite gradients above which the run warns.
  LossScalerOptions loss_scale;
  // --memory-format: auto (channels-last on CPU ranks, contiguous on GPUs,
  // whose cuDNN path is NCHW in this build), channels_last or contiguous.
  std::string memory_format = "auto";
  double max_skipped_share = 0.05;
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
  // imagefolder: training crops' area share and flips; decode threads per
  // rank (0: the default, launch/training_data.h) and batches prepared ahead.
  double crop_scale_min = 0.08, crop_scale_max = 1.0;
  bool hflip = true;
  int loader_threads = 0;
  int prefetch = 2;
  // BERT: --seq-len (synthetic data; a file has its own, which must match
  // when --seq-len is given) and --dropout.
  int64_t seq_len = 128;
  bool seq_len_given = false;
  float dropout = 0.1f;
  // BERT's head: "pretraining" (MLM + NSP), "classification" (one label
  // per sequence, --num-classes) or "question-answering" (answer spans).
  std::string task = "pretraining";
  // Question answering: each evaluation feature's best span goes to
  // predictions_file; with squad_eval_file (SQuAD's JSON) the summary
  // gets exact match and F1.
  std::string predictions_file, squad_eval_file;
  // Encoder layers recompute their activations in backward.
  bool activation_checkpointing = false;
  bool zero_init_residual = false;

  std::string config;  // --config's file, where one was given
  std::string load_weights, save_weights, metrics_file;
  std::string tensorboard_dir;  // rank 0's TensorBoard event file goes there
  int64_t log_every = 0;        // progress lines in a log: every N steps; 0: about every 10 s
  std::string timeline;         // Chrome trace-event JSON, written by rank 0
  std::string profile_file;     // rank 0's step profile (launch/step_profile.h)
  // --contention-probe: every rank trains alone while the probe loads and
  // times (comm/contention_probe.h); rank 0 writes the result here.
  std::string contention_probe;
  double contention_probe_mb = 16.0;
  int64_t timeline_first = 3, timeline_last = 12;  // the 1-based steps it records
  // Checkpoints (launch/checkpointer.h): where, how often (optimizer
  // steps; 0 never), how many complete ones to keep (0 all), and whether to
  // continue from the newest.
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0, checkpoint_keep = 3;
  bool resume = false;

  // Data parallelism. --comm-timeout-s: the collective watchdog's limit
  // (comm/watchdog.h; 0 off).
  double comm_timeout_s = 300.0;
  double preemption_grace_s = 30.0;  // after a first SIGTERM/SIGUSR1 (launch/preemption.h)
  double bucket_mb = 25.0, first_bucket_mb = 1.0;
  bool bucket_mb_auto = false;  // --bucket-mb auto: the trainer sets bucket_mb at setup
  bool overlap = true;
  int zero_stage = 0;  // 0: plain data parallelism; 1: optimizer state sharded; 2: gradients too; 3: parameters too
  int zero_prefetch = 1;  // ZeRO-3: buckets gathered ahead
  // ZeRO gathers the 16-bit weight copy when the model keeps one
  // (--zero-gather-dtype auto), else f32.
  bool zero_gather_low_precision = true;
  // --grad-compression none | fp16 | bf16 | auto (the 16-bit type of
  // --precision fp16/bf16, else none).
  DType wire_dtype = DType::kF32;
  bool grad_compression_auto = false;  // wire_dtype came from --grad-compression auto
};

// "dynamic", "none" or the static scale: --loss-scale as resolved.
std::string LossScaleName(const LossScalerOptions& options);

// The dtype activations and the weights' working copies take for
// --precision: bf16 or f16 for bf16/fp16, f32 otherwise.
DType ComputeDType(const std::string& precision);

// The memory plan's flags (launch/plan_options.cc), after the others.
Status ReadPlanFlags(TrainOptions* options);

// Reads and checks every flag.
StatusOr<TrainOptions> ReadTrainOptions();

}  // namespace ddp
