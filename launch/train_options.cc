#include "launch/train_options.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <gflags/gflags.h>
#include "runtime/byte_size.h"

DEFINE_bool(check_flags, false,
            "parse and check the flags (and --config), print the first fault in one line, and exit (1, or 0 when "
            "they hold) without starting MPI: for job scripts, before they queue a run");
DEFINE_string(config, "", "a TrainConfig in protobuf text format; flags given here override it");
DEFINE_string(model, "resnet50",
              "resnet18, resnet34, resnet50, resnet101, resnet152, bert-tiny, bert-base or bert-large");
DEFINE_string(device, "auto", "auto, cpu or cuda; meta: plan memory instead of training (--plan-memory)");
DEFINE_string(device_memory_limit, "",
              "cap this rank's device memory for tensors (e.g. 24GiB: an RTX 4090's, on a larger GPU; on CPU ranks, "
              "host memory): past it the run ends with the out-of-memory line a card of that size gives; empty: "
              "no cap");
DEFINE_string(precision, "fp32",
              "fp32; tf32 (GPU math mode); bf16 (mixed precision: 16-bit activations, f32 master weights; on CPUs "
              "with AVX-512 BF16); fp16 (GPU, with dynamic loss scaling)");
DEFINE_string(loss_scale, "auto", "auto (dynamic for fp16, none otherwise), dynamic, none, or a static scale");
DEFINE_int64(loss_scale_growth_interval, 2000, "dynamic loss scale: finite steps in a row before it doubles");
DEFINE_string(memory_format, "auto",
              "activations' layout: auto (channels_last on CPU ranks and for fp16/bf16 on GPUs, contiguous for "
              "fp32/tf32 on GPUs), channels_last (NHWC) or contiguous (NCHW)");
DEFINE_double(max_skipped_share, 0.05, "warn when more than this share of steps is skipped for non-finite gradients");
DEFINE_bool(deterministic, false, "GPU: deterministic algorithms, chosen the same way every run (bitwise tests)");
DEFINE_bool(cuda_graphs, false,
            "GPU: capture each step's forward, backward and gradient all-reduces into a CUDA graph once (after two "
            "eager warm-up steps) and replay it; needs --comm nccl with several ranks, and no ZeRO");
DEFINE_string(comm, "auto", "auto (nccl on GPUs, mpi on CPU), nccl, or mpi (on GPUs: staged through pinned host memory)");
DEFINE_int64(batch_size, 8, "samples per rank per micro-batch");
DEFINE_int64(accumulation_steps, 1, "micro-batches per optimizer step");
DEFINE_int64(steps, 0, "optimizer steps (default 100 unless --epochs is given)");
DEFINE_int64(epochs, 0, "passes over the training data (tensors:, imagefolder: or tokens: data); instead of --steps");
DEFINE_uint64(seed, 1, "seed for initial weights, synthetic data and shuffling");
DEFINE_int32(threads, 0, "CPU threads per rank; 0: the node's cores divided among its ranks");
DEFINE_string(optimizer, "sgd", "sgd, adamw or lamb");
DEFINE_double(lr, 0.0, "base learning rate; 0: the linear scaling rule, 0.1 x global batch / 256");
DEFINE_double(momentum, 0.9, "SGD momentum");
DEFINE_bool(nesterov, false, "Nesterov momentum");
DEFINE_double(weight_decay, 0.0, "weight decay (decoupled for adamw)");
DEFINE_bool(decay_bn_bias, true, "apply weight decay to BN and bias parameters too");
DEFINE_int64(warmup_steps, 0, "linear warmup steps");
DEFINE_string(lr_schedule, "constant", "constant, cosine, step, poly or linear after warmup");
DEFINE_int64(lr_step_size, 0, "step schedule: decay every this many steps (0: a third of the run)");
DEFINE_double(lr_step_gamma, 0.1, "step schedule: decay factor");
DEFINE_double(lr_poly_power, 2.0, "poly schedule: power");
DEFINE_double(label_smoothing, 0.0, "cross-entropy label smoothing in [0, 1)");
DEFINE_double(clip_grad_norm, 0.0, "clip gradients to this global norm; 0: no clipping");
DEFINE_string(data, "synthetic",
              "synthetic, tensors:FILE.safetensors, imagefolder:DIR (one folder of JPEG/PNG images per class) or "
              "tokens:PATH (tokenized shards, for BERT)");
DEFINE_string(eval_data, "", "held-out data in the same forms (not synthetic); reports the model's accuracy");
DEFINE_int64(eval_every, 0, "evaluate every this many steps (and at the end); 0: at the end only");
DEFINE_bool(shuffle, true, "shuffle each epoch (seed + epoch); --noshuffle keeps file order");
DEFINE_int64(image_size, 224, "image height and width (synthetic and imagefolder data)");
DEFINE_string(crop_scale, "0.08,1",
              "imagefolder training crops: MIN,MAX share of the image's area (RandomResizedCrop's scale)");
DEFINE_bool(hflip, true, "imagefolder training: flip half the images horizontally; --nohflip for digits or text");
DEFINE_int32(loader_threads, 0,
             "threads per rank decoding imagefolder data; 0: 1 on CPU ranks, the node's cores divided among its ranks "
             "less one on GPU ranks");
DEFINE_int32(prefetch, 2, "batches each rank's loader prepares ahead of the step");
DEFINE_int64(num_classes, 1000, "classes");
DEFINE_int64(seq_len, 128, "BERT: tokens per sequence of synthetic data (at most 512)");
DEFINE_double(dropout, 0.1, "BERT: hidden and attention dropout probability in [0, 1)");
DEFINE_bool(activation_checkpointing, false,
            "each BERT encoder layer, or ResNet stage, keeps only its input in forward and recomputes in backward "
            "(less memory, more compute; gradients bit for bit the same)");
DEFINE_string(task, "pretraining",
              "BERT: pretraining (MLM + next-sentence prediction), classification (a label per sequence, "
              "--num-classes) or question-answering (SQuAD's answer spans: start_positions and end_positions); "
              "fine-tune from pretraining weights with --load-weights");
DEFINE_string(predictions_file, "",
              "question answering: write each --eval-data feature's best answer span (TSV) after the final "
              "evaluation, for tools/squad_eval");
DEFINE_string(squad_eval_file, "",
              "question answering: SQuAD JSON of the --eval-data questions; the summary gets exact match and F1");
DEFINE_bool(zero_init_residual, false, "start each residual block's last BN at zero (torchvision's option)");
DEFINE_string(load_weights, "", "safetensors file of PyTorch-named parameters and buffers to start from");
DEFINE_string(save_weights, "", "safetensors file to write the trained parameters and buffers to");
DEFINE_string(metrics_file, "", "JSON lines: one record per step, then a summary");
DEFINE_string(tensorboard_dir, "", "rank 0 writes each step's scalars there as a TensorBoard event file");
DEFINE_string(profile_file, "",
              "rank 0 writes its step profile there (JSON): forward, backward and each gradient's ready time, the scaling "
              "model's input (tools/scaling_model)");
DEFINE_string(contention_probe, "",
              "measure how CPU ranks' compute and collectives slow each other, and write it there (JSON, rank 0): "
              "every rank trains alone while the ranks all-reduce --contention-probe-mb, or a quarter of it, back to back "
              "beside the backward of every other step (tools/scaling/scaling_validation's input to the scaling model)");
DEFINE_double(contention_probe_mb, 16.0,
              "the larger all-reduce --contention-probe runs, in MiB (alternate loaded steps run a quarter of it)");
DEFINE_string(timeline, "", "Chrome trace-event JSON of the steps in --timeline-steps, every rank's, written by rank 0");
DEFINE_string(timeline_steps, "3:12", "A:B: the 1-based steps, inclusive, the --timeline records");
DEFINE_int64(log_every, 0,
             "progress lines in a log (not a terminal, where one line is redrawn): every this many steps; 0: about "
             "every 10 s");
DEFINE_string(checkpoint_dir, "",
              "directory of checkpoints (step_NNNNNNNN/ each, and a 'latest' file); shared by every rank");
DEFINE_int64(checkpoint_every, 0, "write a checkpoint every N optimizer steps (0: never)");
DEFINE_int64(checkpoint_keep, 3, "complete checkpoints to keep in --checkpoint-dir (0: all)");
DEFINE_bool(resume, false,
            "continue from the newest checkpoint in --checkpoint-dir (its weights, optimizer state, loss scale and "
            "data position); with none there yet, start from step 0");
DEFINE_double(comm_timeout_s, 300.0,
              "seconds a collective may take before the watchdog ends the job, naming it (a peer rank died or "
              "stopped answering); 0: wait forever");
DEFINE_double(preemption_grace_s, 30.0,
              "after SIGTERM or SIGUSR1, seconds the step in progress may take to end (then every rank stops "
              "there with a checkpoint); past them, or on a second signal, the rank ends at once without one; "
              "0: no limit");
DEFINE_string(bucket_mb, "25",
              "gradient bucket size in MiB, or auto: chosen by the scaling model from a short profile and a probe of "
              "the communicator");
DEFINE_double(first_bucket_mb, 1.0, "size of the first gradient bucket in MiB");
DEFINE_bool(overlap, true, "all-reduce buckets while backward runs; --nooverlap reduces after backward");
DEFINE_int32(zero_stage, 0,
             "ZeRO stage: 0 (plain data parallelism), 1 (optimizer state sharded across ranks), 2 (gradients too), "
             "3 (parameters too, each bucket gathered while a layer reads it; fp32 for now)");
DEFINE_int32(zero_prefetch, 1,
             "ZeRO-3: how many buckets ahead of the one forward or backward reads are gathered in advance (0: each "
             "when first read); each rank holds about this + 2 gathered buckets");
DEFINE_string(zero_gather_dtype, "auto",
              "ZeRO's parameter all-gather: auto (the 16-bit weight copy under --precision fp16/bf16, batch norm "
              "and biases in f32 beside it; f32 otherwise) or fp32");
DEFINE_string(grad_compression, "auto",
              "none, fp16 or bf16 gradients on the wire; auto: the 16-bit type of --precision fp16/bf16, none in "
              "fp32");

namespace ddp {
namespace {

// 0.05, 25, -1: doubles as a user typed them.
std::string Num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

std::string LossScaleName(const LossScalerOptions& options) {
  switch (options.mode) {
    case LossScalerOptions::Mode::kNone: return "none";
    case LossScalerOptions::Mode::kDynamic: return "dynamic";
    case LossScalerOptions::Mode::kStatic: return Num(options.initial_scale);
  }
  return "?";
}

DType ComputeDType(const std::string& precision) {
  if (precision == "bf16") return DType::kBF16;
  if (precision == "fp16") return DType::kF16;
  return DType::kF32;
}

namespace {

// A flag's value must be positive.
Status Positive(int64_t v, const char* flag) {
  if (v <= 0) return InvalidArgument(std::string(flag) + " must be positive, got " + std::to_string(v));
  return Status::Ok();
}

// What runs and how long: the model, the device and its precision, the batch, the steps, the threads.
Status ReadRunFlags(TrainOptions* options) {
  TrainOptions& o = *options;
  o.model = FLAGS_model;
  if (FLAGS_device != "auto" && FLAGS_device != "cpu" && FLAGS_device != "cuda" && FLAGS_device != "meta") {
    return InvalidArgument("--device '" + FLAGS_device + "' is unknown; use auto, cpu, cuda or meta");
  }
  o.device = FLAGS_device;  // launch/device_binding chooses the rank's device
  if (!FLAGS_device_memory_limit.empty()) {
    ASSIGN_OR_RETURN(o.device_memory_limit, ParseByteSize("--device-memory-limit", FLAGS_device_memory_limit));
  }
  if (FLAGS_precision != "fp32" && FLAGS_precision != "tf32" && FLAGS_precision != "fp16" &&
      FLAGS_precision != "bf16") {
    return InvalidArgument("--precision '" + FLAGS_precision + "' is unknown; use fp32, tf32, fp16 or bf16");
  }
  o.precision = FLAGS_precision;  // checked against the rank's device by launch/device_binding
  o.deterministic = FLAGS_deterministic;
  o.cuda_graphs = FLAGS_cuda_graphs;
  if (FLAGS_loss_scale == "auto") {
    o.loss_scale.mode =
        o.precision == "fp16" ? LossScalerOptions::Mode::kDynamic : LossScalerOptions::Mode::kNone;
  } else {
    ASSIGN_OR_RETURN(o.loss_scale, ParseLossScale(FLAGS_loss_scale));
  }
  if (FLAGS_loss_scale_growth_interval <= 0) {
    return InvalidArgument("--loss-scale-growth-interval must be positive, got " +
                           std::to_string(FLAGS_loss_scale_growth_interval));
  }
  o.loss_scale.growth_interval = FLAGS_loss_scale_growth_interval;
  if (!(FLAGS_max_skipped_share >= 0.0 && FLAGS_max_skipped_share <= 1.0)) {
    return InvalidArgument("--max-skipped-share must be in [0, 1], got " + Num(FLAGS_max_skipped_share));
  }
  o.max_skipped_share = FLAGS_max_skipped_share;
  if (FLAGS_memory_format != "auto" && FLAGS_memory_format != "channels_last" &&
      FLAGS_memory_format != "contiguous") {
    return InvalidArgument("--memory-format '" + FLAGS_memory_format +
                           "' is unknown; use auto, channels_last or contiguous");
  }
  o.memory_format = FLAGS_memory_format;
  if (FLAGS_comm != "auto" && FLAGS_comm != "nccl" && FLAGS_comm != "mpi") {
    return InvalidArgument("--comm '" + FLAGS_comm + "' is unknown; use auto, nccl or mpi");
  }
  o.comm = FLAGS_comm;
  RETURN_IF_ERROR(Positive(FLAGS_batch_size, "--batch-size"));
  o.batch_size = FLAGS_batch_size;
  RETURN_IF_ERROR(Positive(FLAGS_accumulation_steps, "--accumulation-steps"));
  o.accumulation_steps = FLAGS_accumulation_steps;
  if (FLAGS_steps < 0) return InvalidArgument("--steps must be positive, got " + std::to_string(FLAGS_steps));
  if (FLAGS_epochs < 0) return InvalidArgument("--epochs must be positive, got " + std::to_string(FLAGS_epochs));
  if (FLAGS_steps > 0 && FLAGS_epochs > 0) return InvalidArgument("give --steps or --epochs, not both");
  o.steps = FLAGS_steps > 0 || FLAGS_epochs > 0 ? FLAGS_steps : 100;
  o.epochs = FLAGS_epochs;
  o.seed = FLAGS_seed;
  if (FLAGS_threads < 0) return InvalidArgument("--threads must be non-negative, got " + std::to_string(FLAGS_threads));
  // Far more threads than cores only thrashes (each rank's share is
  // smaller still): a typo, most likely.
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores > 0 && FLAGS_threads > 4 * cores) {
    return InvalidArgument("--threads " + std::to_string(FLAGS_threads) + " is far more than the " +
                           std::to_string(cores) + " cores of this machine");
  }
  o.threads = FLAGS_threads;
  return Status::Ok();
}

// The optimizer and its learning-rate schedule; the loss's label smoothing and clipping.
Status ReadOptimizerFlags(TrainOptions* options) {
  TrainOptions& o = *options;
  if (FLAGS_optimizer != "sgd" && FLAGS_optimizer != "adamw" && FLAGS_optimizer != "lamb") {
    return InvalidArgument("--optimizer '" + FLAGS_optimizer + "' is unknown; use sgd, adamw or lamb");
  }
  o.optimizer = FLAGS_optimizer;
  if (!(FLAGS_lr >= 0.0) || !std::isfinite(FLAGS_lr)) {
    return InvalidArgument("--lr must be a positive number, got " + Num(FLAGS_lr));
  }
  o.lr = FLAGS_lr;  // 0: the trainer applies the linear scaling rule
  if (!(FLAGS_momentum >= 0.0 && FLAGS_momentum < 1.0)) return InvalidArgument("--momentum must be in [0, 1)");
  o.momentum = FLAGS_momentum;
  if (FLAGS_nesterov && FLAGS_momentum == 0.0) return InvalidArgument("--nesterov needs a positive --momentum");
  o.nesterov = FLAGS_nesterov;
  if (!(FLAGS_weight_decay >= 0.0) || !std::isfinite(FLAGS_weight_decay)) {
    return InvalidArgument("--weight-decay must be non-negative");
  }
  o.weight_decay = FLAGS_weight_decay;
  o.decay_bn_bias = FLAGS_decay_bn_bias;
  if (FLAGS_warmup_steps < 0) return InvalidArgument("--warmup-steps must be non-negative");
  ASSIGN_OR_RETURN(o.schedule.kind, ParseLrScheduleKind(FLAGS_lr_schedule));
  o.schedule.base_lr = o.lr;  // the trainer resolves 0
  o.schedule.warmup_steps = FLAGS_warmup_steps;
  if (FLAGS_lr_step_size < 0) return InvalidArgument("--lr-step-size must be non-negative");
  o.schedule.step_size = FLAGS_lr_step_size;
  if (!(FLAGS_lr_step_gamma > 0.0 && FLAGS_lr_step_gamma <= 1.0)) return InvalidArgument("--lr-step-gamma must be in (0, 1]");
  o.schedule.step_gamma = FLAGS_lr_step_gamma;
  if (!(FLAGS_lr_poly_power > 0.0)) return InvalidArgument("--lr-poly-power must be positive");
  o.schedule.poly_power = FLAGS_lr_poly_power;
  if (!(FLAGS_label_smoothing >= 0.0 && FLAGS_label_smoothing < 1.0)) {
    return InvalidArgument("--label-smoothing must be in [0, 1)");
  }
  o.label_smoothing = FLAGS_label_smoothing;
  if (!(FLAGS_clip_grad_norm >= 0.0)) return InvalidArgument("--clip-grad-norm must be non-negative");
  o.clip_grad_norm = FLAGS_clip_grad_norm;
  return Status::Ok();
}

// The data, its transforms and held-out set; the models' shape flags (classes, sequence length, dropout, task).
Status ReadDataFlags(TrainOptions* options) {
  TrainOptions& o = *options;
  o.data = FLAGS_data;
  o.eval_data = FLAGS_eval_data;
  if (FLAGS_eval_every < 0) return InvalidArgument("--eval-every must be non-negative");
  o.eval_every = FLAGS_eval_every;
  o.shuffle = FLAGS_shuffle;
  RETURN_IF_ERROR(Positive(FLAGS_image_size, "--image-size"));
  if (FLAGS_image_size < 32) {
    return InvalidArgument("--image-size must be at least 32 for ResNet, got " + std::to_string(FLAGS_image_size));
  }
  o.image_size = FLAGS_image_size;
  {
    // A micro-batch of images must be countable: B x 3 x S x S elements.
    int64_t elements = 0;
    if (__builtin_mul_overflow(FLAGS_image_size, FLAGS_image_size, &elements) ||
        __builtin_mul_overflow(elements, int64_t{3}, &elements) ||
        __builtin_mul_overflow(elements, FLAGS_batch_size, &elements)) {
      return InvalidArgument("--batch-size " + std::to_string(FLAGS_batch_size) + " x 3 x --image-size " +
                             std::to_string(FLAGS_image_size) + " squared overflows a 64-bit element count");
    }
  }
  {
    double lo = 0.0, hi = 0.0;
    int used = 0;
    if (std::sscanf(FLAGS_crop_scale.c_str(), "%lf,%lf%n", &lo, &hi, &used) != 2 ||
        used != static_cast<int>(FLAGS_crop_scale.size()) || !(lo > 0.0 && lo <= hi && hi <= 1.0)) {
      return InvalidArgument("--crop-scale '" + FLAGS_crop_scale + "' is not MIN,MAX with 0 < MIN <= MAX <= 1");
    }
    o.crop_scale_min = lo;
    o.crop_scale_max = hi;
  }
  o.hflip = FLAGS_hflip;
  if (FLAGS_loader_threads < 0) {
    return InvalidArgument("--loader-threads must be non-negative, got " + std::to_string(FLAGS_loader_threads));
  }
  o.loader_threads = FLAGS_loader_threads;
  // Batches held ahead: past a few the loader gains nothing and the memory
  // goes (each one is a whole batch of host and pinned memory).
  if (FLAGS_prefetch < 1 || FLAGS_prefetch > 64) {
    return InvalidArgument("--prefetch must be in [1, 64] batches, got " + std::to_string(FLAGS_prefetch));
  }
  o.prefetch = FLAGS_prefetch;
  if (FLAGS_num_classes < 2) return InvalidArgument("--num-classes must be at least 2, got " + std::to_string(FLAGS_num_classes));
  o.num_classes = FLAGS_num_classes;
  if (FLAGS_seq_len < 8 || FLAGS_seq_len > 512) {
    return InvalidArgument("--seq-len must be in [8, 512] (BERT's positions), got " + std::to_string(FLAGS_seq_len));
  }
  o.seq_len = FLAGS_seq_len;
  {
    gflags::CommandLineFlagInfo info;
    o.seq_len_given = gflags::GetCommandLineFlagInfo("seq_len", &info) && !info.is_default;
  }
  if (!(FLAGS_dropout >= 0.0 && FLAGS_dropout < 1.0)) {
    return InvalidArgument("--dropout must be in [0, 1), got " + Num(FLAGS_dropout));
  }
  o.dropout = static_cast<float>(FLAGS_dropout);
  if (FLAGS_task != "pretraining" && FLAGS_task != "classification" && FLAGS_task != "question-answering") {
    return InvalidArgument("--task '" + FLAGS_task + "' is unknown; use pretraining, classification or "
                           "question-answering");
  }
  o.task = FLAGS_task;
  o.predictions_file = FLAGS_predictions_file;
  o.squad_eval_file = FLAGS_squad_eval_file;
  if (!o.squad_eval_file.empty() && o.task != "question-answering") {
    return InvalidArgument("--squad-eval-file scores answer spans: it needs --task question-answering");
  }
  if (!o.squad_eval_file.empty() && o.eval_data.empty()) {
    return InvalidArgument("--squad-eval-file scores the --eval-data features: give --eval-data too");
  }
  o.activation_checkpointing = FLAGS_activation_checkpointing;
  o.zero_init_residual = FLAGS_zero_init_residual;
  return Status::Ok();
}

// Files the run reads and writes, observability and checkpoints.
Status ReadFileFlags(TrainOptions* options) {
  TrainOptions& o = *options;
  o.config = FLAGS_config;
  o.load_weights = FLAGS_load_weights;
  o.save_weights = FLAGS_save_weights;
  o.metrics_file = FLAGS_metrics_file;
  o.tensorboard_dir = FLAGS_tensorboard_dir;
  o.timeline = FLAGS_timeline;
  o.profile_file = FLAGS_profile_file;
  if (!o.profile_file.empty() && o.cuda_graphs) {
    return InvalidArgument("--profile-file times eager steps: it cannot be used with --cuda-graphs");
  }
  o.contention_probe = FLAGS_contention_probe;
  if (!(FLAGS_contention_probe_mb > 0.0) || !std::isfinite(FLAGS_contention_probe_mb)) {
    return InvalidArgument("--contention-probe-mb must be positive, got " + Num(FLAGS_contention_probe_mb));
  }
  o.contention_probe_mb = FLAGS_contention_probe_mb;
  if (!o.contention_probe.empty()) {
    // Every rank trains alone: files a job writes once would be written by
    // each rank, and the bucket choice needs a job's collectives.
    for (const auto& [flag, value] : std::vector<std::pair<const char*, std::string>>{
             {"--metrics-file", FLAGS_metrics_file}, {"--profile-file", FLAGS_profile_file},
             {"--timeline", FLAGS_timeline}, {"--tensorboard-dir", FLAGS_tensorboard_dir},
             {"--checkpoint-dir", FLAGS_checkpoint_dir}, {"--save-weights", FLAGS_save_weights}}) {
      if (!value.empty()) {
        return InvalidArgument(std::string("--contention-probe trains every rank alone: it cannot be used with ") +
                               flag);
      }
    }
    if (FLAGS_bucket_mb == "auto") {
      return InvalidArgument("--contention-probe trains every rank alone: it cannot be used with --bucket-mb auto");
    }
  }
  {
    long long a = 0, b = 0;
    int used = 0;
    if (std::sscanf(FLAGS_timeline_steps.c_str(), "%lld:%lld%n", &a, &b, &used) != 2 ||
        used != static_cast<int>(FLAGS_timeline_steps.size()) || a < 1 || b < a) {
      return InvalidArgument("--timeline-steps '" + FLAGS_timeline_steps + "' is not A:B with 1 <= A <= B");
    }
    o.timeline_first = a;
    o.timeline_last = b;
  }
  if (FLAGS_log_every < 0) return InvalidArgument("--log-every must be non-negative, got " + std::to_string(FLAGS_log_every));
  o.log_every = FLAGS_log_every;
  if (FLAGS_checkpoint_every < 0) {
    return InvalidArgument("--checkpoint-every must be 0 (never) or positive, got " +
                           std::to_string(FLAGS_checkpoint_every));
  }
  if (FLAGS_checkpoint_keep < 0) {
    return InvalidArgument("--checkpoint-keep must be 0 (all) or positive, got " +
                           std::to_string(FLAGS_checkpoint_keep));
  }
  if ((FLAGS_checkpoint_every > 0 || FLAGS_resume) && FLAGS_checkpoint_dir.empty()) {
    return InvalidArgument(std::string(FLAGS_resume ? "--resume" : "--checkpoint-every") + " needs --checkpoint-dir");
  }
  o.checkpoint_dir = FLAGS_checkpoint_dir;
  o.checkpoint_every = FLAGS_checkpoint_every;
  o.checkpoint_keep = FLAGS_checkpoint_keep;
  o.resume = FLAGS_resume;
  return Status::Ok();
}

// Gradient buckets, the collectives' timeout, preemption, ZeRO and gradient compression.
Status ReadDistributedFlags(TrainOptions* options) {
  TrainOptions& o = *options;
  if (FLAGS_bucket_mb == "auto") {
    // The choice trades bucket latency against what backward hides; without
    // overlap nothing is hidden and the size hardly matters.
    if (!FLAGS_overlap) {
      return InvalidArgument("--bucket-mb auto chooses the size whose all-reduces backward hides best, and "
                             "--nooverlap hides none: give a size or drop --nooverlap");
    }
    o.bucket_mb_auto = true;
  } else {
    char* end = nullptr;
    o.bucket_mb = std::strtod(FLAGS_bucket_mb.c_str(), &end);
    if (FLAGS_bucket_mb.empty() || *end != '\0' || !(o.bucket_mb > 0.0) || !std::isfinite(o.bucket_mb)) {
      return InvalidArgument("--bucket-mb must be positive (MiB) or auto, got '" + FLAGS_bucket_mb + "'");
    }
  }
  if (!(FLAGS_first_bucket_mb > 0.0) || !std::isfinite(FLAGS_first_bucket_mb)) {
    return InvalidArgument("--first-bucket-mb must be positive, got " + Num(FLAGS_first_bucket_mb));
  }
  if (!(FLAGS_comm_timeout_s >= 0.0) || !std::isfinite(FLAGS_comm_timeout_s)) {
    return InvalidArgument("--comm-timeout-s must be 0 (no timeout) or positive, got " + Num(FLAGS_comm_timeout_s));
  }
  o.comm_timeout_s = FLAGS_comm_timeout_s;
  if (!(FLAGS_preemption_grace_s >= 0.0) || !std::isfinite(FLAGS_preemption_grace_s)) {
    return InvalidArgument("--preemption-grace-s must be 0 (no limit) or positive, got " +
                           Num(FLAGS_preemption_grace_s));
  }
  o.preemption_grace_s = FLAGS_preemption_grace_s;
  o.first_bucket_mb = FLAGS_first_bucket_mb;
  o.overlap = FLAGS_overlap;
  if (FLAGS_zero_stage < 0 || FLAGS_zero_stage > 3) {
    return InvalidArgument("--zero-stage must be 0, 1, 2 or 3, got " + std::to_string(FLAGS_zero_stage));
  }
  o.zero_stage = FLAGS_zero_stage;
  if (FLAGS_zero_prefetch < 0 || FLAGS_zero_prefetch > 64) {
    return InvalidArgument("--zero-prefetch must be 0 to 64 buckets, got " + std::to_string(FLAGS_zero_prefetch));
  }
  o.zero_prefetch = FLAGS_zero_prefetch;
  if (FLAGS_zero_gather_dtype != "auto" && FLAGS_zero_gather_dtype != "fp32") {
    return InvalidArgument("--zero-gather-dtype '" + FLAGS_zero_gather_dtype + "' is unknown; use auto or fp32");
  }
  o.zero_gather_low_precision = FLAGS_zero_gather_dtype == "auto";
  if (o.zero_stage == 3 && !o.zero_gather_low_precision && o.precision != "fp32" && o.precision != "tf32") {
    return Unimplemented("--zero-gather-dtype fp32 with --zero-stage 3 under --precision " + o.precision +
                         ": stage 3 gathers each layer's weights in the 16-bit working dtype; use "
                         "--zero-gather-dtype auto, or --zero-stage 2");
  }
  o.grad_compression_auto = FLAGS_grad_compression == "auto";
  if (FLAGS_grad_compression == "auto") {
    o.wire_dtype = ComputeDType(o.precision);
  } else if (FLAGS_grad_compression == "none") {
    o.wire_dtype = DType::kF32;
  } else if (FLAGS_grad_compression == "bf16") {
    o.wire_dtype = DType::kBF16;
  } else if (FLAGS_grad_compression == "fp16") {
    o.wire_dtype = DType::kF16;
  } else {
    return InvalidArgument("--grad-compression '" + FLAGS_grad_compression +
                           "' is unknown; use auto, none, fp16 or bf16");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<TrainOptions> ReadTrainOptions() {
  TrainOptions o;
  RETURN_IF_ERROR(ReadRunFlags(&o));
  RETURN_IF_ERROR(ReadOptimizerFlags(&o));
  RETURN_IF_ERROR(ReadDataFlags(&o));
  RETURN_IF_ERROR(ReadFileFlags(&o));
  RETURN_IF_ERROR(ReadDistributedFlags(&o));
  RETURN_IF_ERROR(ReadPlanFlags(&o));
  return o;
}

}  // namespace ddp
