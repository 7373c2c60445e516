#include "launch/trainer.h"

#include <sys/resource.h>
#include <unistd.h>

#include <gflags/gflags.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <thread>

#include "comm/watchdog.h"
#include "launch/evaluator.h"
#include "launch/gradient_sync.h"
#include "launch/input_pipeline.h"
#include "launch/output_paths.h"
#include "launch/preemption.h"
#include "launch/rank_times.h"
#include "launch/run_reporter.h"
#include "launch/step_agreement.h"
#include "launch/step_graph.h"
#include "launch/train_checkpoints.h"
#include "runtime/allocator.h"
#include "runtime/clock.h"
#include "runtime/median.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/durable_files.h"
#include "runtime/ops/conv2d.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/reduce.h"
#include "runtime/safetensors.h"
#include "runtime/timeline.h"
#include "launch/bucket_autotune.h"

namespace ddp {
namespace {

// Input waits above this share of step time get a warning.
constexpr double kInputWaitWarnShare = 0.05;
// GPU clocks, temperature, power and throttling: sampled this often.
constexpr double kHealthIntervalSeconds = 5.0;

int DefaultThreads() {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return cores > 0 ? static_cast<int>(cores) : 1;
}

int64_t PeakResidentBytes() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // KiB on Linux
}

}  // namespace

// The machine's cores divided among the ranks on this node.
int ThreadsFor(const TrainOptions& options, const RankInfo& ranks) {
  if (options.threads > 0) return options.threads;
  return std::max(1, DefaultThreads() / std::max(1, ranks.local_size));
}

void FallBackFromCpuBf16(TrainOptions* options, bool announce) {
  if (announce) {
    std::printf("ddp_train: --precision bf16: this CPU lacks AVX-512 BF16 and AMX, where bf16 runs slower than f32; "
                "training in fp32\n");
  }
  options->precision = "fp32";
  if (options->grad_compression_auto) options->wire_dtype = DType::kF32;
}

namespace {

ExecutionContext MakeContext(const TrainOptions& options, const RankInfo& ranks, void* cuda_stream) {
  if (options.gpu < 0) return ExecutionContext::Cpu(ThreadsFor(options, ranks));
  ExecutionContext ctx = ExecutionContext::Cuda(options.gpu, cuda_stream);
  ctx.set_allow_tf32(options.precision == "tf32");
  ctx.set_deterministic(options.deterministic);
  return ctx;
}

}  // namespace

Trainer::Trainer(const TrainOptions& options, Communicator* comm, const RankInfo& ranks, void* cuda_stream,
                 const FaultInjection& faults)
    : options_(options),
      faults_(faults),
      comm_(comm),
      ranks_(ranks),
      ctx_(MakeContext(options, ranks, cuda_stream)),
      timeline_({options.timeline, options.timeline_first, options.timeline_last, ranks.rank, ranks.world_size}) {}

Trainer::~Trainer() {
  step_graph_.reset();  // before the context, model and reducer it uses
  for (void* e : compute_events_) {
    if (e != nullptr) cuda::DestroyEvent(e);
  }
}

StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const TrainOptions& options, Communicator* comm,
                                                   const RankInfo& ranks, void* cuda_stream,
                                                   const FaultInjection& faults) {
  CHECK(ranks.world_size == 1 || (comm != nullptr && comm->world_size() == ranks.world_size))
      << "several ranks need a communicator";
  std::unique_ptr<Trainer> trainer(new Trainer(options, comm, ranks, cuda_stream, faults));
  RETURN_IF_ERROR(trainer->Setup());
  return trainer;
}

Status Trainer::BroadcastInitialState() {
  if (!distributed()) return Status::Ok();
  std::vector<Tensor> state = {model_->flat_parameters()};
  for (Buffer* b : model_->buffers()) state.push_back(b->value);
  RETURN_IF_ERROR(comm_->BroadcastCoalesced(std::move(state), 0)->Wait());
  model_->RefreshLowPrecision(ctx_);
  return Status::Ok();
}

namespace {

// A metrics record's numbers as TensorBoard scalars: "train/loss", ...,
// "eval/accuracy".
std::vector<std::pair<std::string, double>> TensorBoardScalars(const nlohmann::ordered_json& record) {
  std::vector<std::pair<std::string, double>> scalars;
  for (const auto& [key, value] : record.items()) {
    if (key == "step" || !value.is_number()) continue;
    scalars.emplace_back(key == "eval_accuracy" ? "eval/accuracy" : "train/" + key, value.get<double>());
  }
  return scalars;
}

// Whether progress may redraw one line: stdout is a terminal and no
// launcher stands between it and the user (mpirun hands its ranks
// pseudo-terminals even when its own output goes to a file).
bool StdoutIsATerminal() {
  for (const char* launched : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "SLURM_STEP_ID"}) {
    if (std::getenv(launched) != nullptr) return false;
  }
  return ::isatty(STDOUT_FILENO) == 1;
}

}  // namespace

void Trainer::StartGpuHealth() {
  const int gpu = ctx_.device().index;
  const std::string name = "GPU " + std::to_string(gpu);
  const std::string prefix =
      ranks_.world_size > 1 ? "ddp_train: rank " + std::to_string(ranks_.rank) + ": " : std::string("ddp_train: ");
  const char* root = std::getenv("DDP_SYSFS_ROOT");  // tests: a fake tree
  const std::string sysfs = root != nullptr ? root : "/sys";
  const std::string address = cuda::PciAddress(gpu);
  const StatusOr<PcieLink> link = ReadPcieLink(sysfs, address);
  std::string line = prefix + name + " (" + cuda::DeviceDescription(gpu) + ", " + address + "): ";
  if (link.ok()) {
    line += "PCIe " + DescribeLink(link->speed_gts, link->width) + ", the card's " +
            DescribeLink(link->max_speed_gts, link->max_width) + " (speed drops while idle)";
    gpu_summary_["pcie"] = DescribeLink(link->speed_gts, link->width);
    gpu_summary_["pcie_max"] = DescribeLink(link->max_speed_gts, link->max_width);
  } else {
    // Sandboxes (gVisor) and some containers hide sysfs's link files.
    line += "PCIe link unknown (" + link.status().message() + ")";
    gpu_summary_["pcie"] = "unavailable";
    gpu_summary_["pcie_error"] = link.status().message();
  }
  std::printf("%s\n", line.c_str());
  if (link.ok()) {
    const std::string narrow = LinkWidthWarning(name, *link);
    if (!narrow.empty()) std::printf("%swarning: %s\n", prefix.c_str(), narrow.c_str());
  }
  std::string why;
  std::unique_ptr<GpuSensor> sensor = OpenNvmlSensor(address, &why);
  if (!sensor) std::printf("%s%s: clocks, temperature and throttling not sampled: %s\n", prefix.c_str(), name.c_str(), why.c_str());
  std::fflush(stdout);
  health_ = std::make_unique<HealthMonitor>(name, prefix, std::move(sensor),
                                            [sysfs, address] { return ReadPcieLink(sysfs, address); },
                                            kHealthIntervalSeconds);
}

void Trainer::RecordPeerAccess(const PeerAccessDecision& decision) {
  if (!on_gpu()) return;
  gpu_summary_["peer_access"] = {{"state", decision.state},
                                 {"nccl_p2p_disable", decision.set_p2p_disable},
                                 {"reason", decision.reason}};
}

Status Trainer::Setup() {
  if (is_root()) {
    // Before anything is written: no output on an input or on another.
    RETURN_IF_ERROR(CheckOutputPaths(InputPaths(options_), OutputPaths(options_)));
    // Created now: a path that cannot be written fails before training.
    if (!options_.tensorboard_dir.empty()) RETURN_IF_ERROR(tensorboard_.Open(options_.tensorboard_dir));
  }
  // Decode threads: on a CPU rank one, beside --threads compute threads (a
  // loader that keeps ahead is mostly idle); on a GPU rank the node's cores
  // less the rank's own thread, shared among its ranks.
  if (options_.loader_threads == 0) {
    options_.loader_threads = on_gpu() ? std::max(1, DefaultThreads() / std::max(1, ranks_.local_size) - 1) : 1;
  }
  ASSIGN_OR_RETURN(data_, OpenTrainingData(options_));
  data_.train = faults_.SlowLoader(std::move(data_.train));
  if (on_gpu()) StartGpuHealth();
  if (!options_.checkpoint_dir.empty()) {  // periodic checkpoints, and one on preemption
    TrainCheckpointsOptions c;
    c.dir = options_.checkpoint_dir;
    c.resume = options_.resume;
    c.every = options_.checkpoint_every;
    c.keep = static_cast<int>(options_.checkpoint_keep);
    c.crash_point = faults_.checkpoint_crash;
    c.model = options_.model;
    c.optimizer = options_.optimizer;
    c.seed = options_.seed;
    c.batch_size = options_.batch_size;
    c.accumulation_steps = options_.accumulation_steps;
    c.rank = ranks_.rank;
    c.world_size = ranks_.world_size;
    ASSIGN_OR_RETURN(checkpoints_, TrainCheckpoints::Create(std::move(c), comm_, &progress_));
  }
  return SetupTraining(data_.train->size());
}

Status Trainer::SetupTraining(int64_t dataset_size) {
  {
    int64_t global = 0;
    if (__builtin_mul_overflow(options_.batch_size, options_.accumulation_steps, &global) ||
        __builtin_mul_overflow(global, static_cast<int64_t>(ranks_.world_size), &global)) {
      return InvalidArgument("the global batch, --batch-size " + std::to_string(options_.batch_size) +
                             " x --accumulation-steps " + std::to_string(options_.accumulation_steps) + " x " +
                             std::to_string(ranks_.world_size) + " ranks, overflows 64 bits");
    }
  }
  SamplerOptions sampler;
  sampler.dataset_size = dataset_size;
  sampler.world_size = ranks_.world_size;
  sampler.rank = ranks_.rank;
  sampler.accumulation_steps = options_.accumulation_steps;
  sampler.batch_size = options_.batch_size;
  sampler.shuffle = options_.shuffle;
  sampler.seed = options_.seed;
  sampler_ = std::make_unique<GlobalBatchSampler>(sampler);
  if (dataset_size != BatchSource::kEndless && sampler_->steps_per_epoch() == 0) {
    return InvalidArgument("--data has " + std::to_string(dataset_size) +
                           " samples, fewer than one global batch of " + std::to_string(sampler_->global_batch()));
  }
  if (options_.epochs > 0) {
    if (dataset_size == BatchSource::kEndless) return InvalidArgument("--epochs needs a tensors:FILE dataset");
    if (__builtin_mul_overflow(options_.epochs, sampler_->steps_per_epoch(), &total_steps_)) {
      return InvalidArgument("--epochs " + std::to_string(options_.epochs) + " x " +
                             std::to_string(sampler_->steps_per_epoch()) + " steps per epoch overflows 64 bits");
    }
  } else {
    total_steps_ = options_.steps;
  }
  // Every step's data position, in samples, must be countable too.
  int64_t samples = 0;
  if (total_steps_ <= 0 || __builtin_mul_overflow(total_steps_, sampler_->global_batch(), &samples)) {
    const std::string run = options_.epochs > 0 ? "--epochs " + std::to_string(options_.epochs)
                                                : "--steps " + std::to_string(options_.steps);
    return InvalidArgument(run + (total_steps_ <= 0 ? std::string(" comes to no step")
                                                    : " (" + std::to_string(total_steps_) + " steps) x the global batch " +
                                                          std::to_string(sampler_->global_batch()) +
                                                          " overflows a 64-bit sample count"));
  }
  options_.schedule.total_steps = total_steps_;
  if (options_.lr <= 0.0) options_.lr = DefaultLearningRate(options_.model, sampler_->global_batch());
  options_.schedule.base_lr = options_.lr;

  compute_dtype_ = ComputeDType(options_.precision);
  if (compute_dtype_ == DType::kF16 && !on_gpu()) {
    return InvalidArgument("--precision fp16 is for GPUs; on the CPU use --precision bf16");
  }
  if (compute_dtype_ == DType::kBF16 && !on_gpu() && !CpuHasFastBf16()) {
    FallBackFromCpuBf16(&options_, is_root());  // ddp_train has done this already, alike on every rank
    compute_dtype_ = ComputeDType(options_.precision);
  }

  ModelOptions model_options;
  model_options.name = options_.model;
  model_options.num_classes = options_.num_classes;
  model_options.zero_init_residual = options_.zero_init_residual;
  model_options.seed = options_.seed;
  model_options.dropout = options_.dropout;
  model_options.task = options_.task;
  model_options.activation_checkpointing = options_.activation_checkpointing;
  model_options.label_smoothing = options_.label_smoothing;
  model_options.compute_dtype = compute_dtype_;
  ASSIGN_OR_RETURN(model_, CreateModel(model_options));
  if (checkpoints_) {
    ASSIGN_OR_RETURN(start_step_, checkpoints_->ResumeModel(*model_, sampler_->global_batch(), total_steps_));
  }
  if (resumed() && !options_.load_weights.empty() && is_root()) {
    std::printf("ddp_train: --load-weights %s: not read; the checkpoint holds the weights\n",
                options_.load_weights.c_str());
  }
  if (!options_.load_weights.empty() && !resumed()) {
    StatusOr<SafetensorsContents> weights = ReadSafetensors(options_.load_weights);
    if (!weights.ok()) return Status(weights.status().code(), "--load-weights " + weights.status().message());
    // Found here, not as a non-finite gradient blamed on the data.
    RETURN_IF_ERROR(CheckFinite(*weights, "--load-weights " + options_.load_weights));
    std::vector<std::pair<std::string, Tensor>> named;
    for (NamedTensor& t : weights->tensors) named.emplace_back(t.name, t.tensor);
    Model::LoadReport report;
    Status loaded = model_->LoadStateDict(named, &report);
    if (!loaded.ok()) return InvalidArgument("--load-weights " + options_.load_weights + ": " + loaded.message());
    // Fine-tuning from another head: one line each for what was left out
    // and what starts fresh.
    auto list = [](const std::vector<std::string>& names) {
      std::string out;
      for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
      return out;
    };
    if (is_root() && !report.dropped.empty()) {
      std::printf("ddp_train: --load-weights %s: dropped %zu tensor%s %s does not use: %s\n",
                  options_.load_weights.c_str(), report.dropped.size(), report.dropped.size() == 1 ? "" : "s",
                  options_.model.c_str(), list(report.dropped).c_str());
    }
    if (is_root() && !report.fresh.empty()) {
      std::printf("ddp_train: --load-weights %s: initialized %zu new tensor%s: %s\n", options_.load_weights.c_str(),
                  report.fresh.size(), report.fresh.size() == 1 ? "" : "s", list(report.fresh).c_str());
    }
  }
  if (on_gpu()) model_->MoveTo(ctx_.device());
  // Channels-last: always on the CPU (oneDNN's NHWC kernels need no
  // reorders); on GPUs for 16-bit training, where cuDNN's tensor-core
  // kernels want NHWC, reading a [K, R, S, C] copy of the weights that the
  // low-precision copy provides (fp32 and tf32 keep none).
  const bool sixteen_bit = compute_dtype_ != DType::kF32;
  if (options_.memory_format == "channels_last" && on_gpu() && !sixteen_bit) {
    return Unimplemented("--memory-format channels_last on GPUs needs --precision fp16 or bf16 (its convolutions "
                         "read a [K, R, S, C] 16-bit weight copy, which " + options_.precision +
                         " runs do not keep); use auto or contiguous");
  }
  // Only where the batch has images (4-D tensors) to convert.
  bool images = false;
  for (const TensorSpec& spec : data_.train->Specs(1)) images = images || spec.shape.size() == 4;
  const bool channels_last = images && (options_.memory_format == "channels_last" ||
                                        (options_.memory_format == "auto" && (!on_gpu() || sixteen_bit)));
  model_->set_channels_last(channels_last);
  if (sixteen_bit) {
    model_->EnableLowPrecision(ctx_, compute_dtype_,
                               on_gpu() && channels_last ? MemoryFormat::kChannelsLast : MemoryFormat::kContiguous);
  }
  scaler_ = std::make_unique<LossScaler>(options_.loss_scale);

  auto weight_decay = [&](const Parameter& p) {
    return options_.decay_bn_bias || !p.is_bias_or_norm ? static_cast<float>(options_.weight_decay) : 0.0f;
  };
  if (options_.bucket_mb_auto) RETURN_IF_ERROR(ChooseBucketSize());
  GradientSyncOptions sync;
  sync.zero_stage = options_.zero_stage;
  sync.bucket_mb = options_.bucket_mb;
  sync.first_bucket_mb = options_.first_bucket_mb;
  sync.overlap = options_.overlap;
  sync.wire_dtype = options_.wire_dtype;
  if (options_.zero_gather_low_precision) sync.gather_dtype = compute_dtype_;
  sync_ = std::make_unique<GradientSync>(comm_, model_.get(), sync, ctx_);
  std::vector<OptimizerSlot> slots = sync_->OptimizerSlots(weight_decay);
  std::vector<SlotPlace> places;
  for (const OptimizerSlot& slot : slots) places.push_back({slot.name, slot.offset, slot.value.numel()});
  if (options_.optimizer == "sgd") {
    SgdOptions sgd;
    sgd.momentum = static_cast<float>(options_.momentum);
    sgd.nesterov = options_.nesterov;
    optimizer_ = MakeSgd(std::move(slots), sgd);
  } else if (options_.optimizer == "adamw") {
    optimizer_ = MakeAdamW(std::move(slots), AdamWOptions());
  } else {
    // Sharded, a parameter's trust-ratio norms sum over every rank's pieces.
    optimizer_ = MakeLamb(std::move(slots), LambOptions(), static_cast<int>(model_->parameters().size()),
                          sync_->NormAllReduce());
  }
  if (checkpoints_) {
    checkpoints_->Attach({model_.get(), optimizer_.get(), scaler_.get(), sync_->zero(), sync_->zero_stage(),
                          std::move(places), sampler_->global_batch(), options_.bucket_mb, options_.first_bucket_mb});
    RETURN_IF_ERROR(checkpoints_->ResumeOptimizer());
  }
  // A resumed run continues the metrics of the run it resumes.
  if (!options_.metrics_file.empty() && is_root()) {
    RETURN_IF_ERROR(resumed() ? metrics_.OpenResumed(options_.metrics_file, start_step_)
                              : metrics_.Open(options_.metrics_file));
  }
  // Installed last: it passes each gradient on to the reducer's hook.
  if (!options_.profile_file.empty() && is_root()) {
    profiler_ = std::make_unique<StepProfiler>(model_.get(), on_gpu() ? ctx_.cuda_stream() : nullptr);
  }

  const int64_t b = options_.batch_size;
  InputPipelineOptions input;
  input.batch_size = b;
  input.accumulation_steps = options_.accumulation_steps;
  input.rank = ranks_.rank;
  input.world_size = ranks_.world_size;
  input.start_step = start_step_;
  input.total_steps = total_steps_;
  input.prefetch = options_.prefetch;
  input_ = std::make_unique<InputPipeline>(input, data_.train.get(), sampler_.get(), ctx_);
  if (options_.cuda_graphs) {
    // ddp_train has refused CPU ranks, MPI between several ranks, and ZeRO.
    CHECK(on_gpu() && !sync_->sharded()) << "--cuda-graphs on " << options_.device
                                         << (sync_->sharded() ? " with ZeRO" : "");
    ASSIGN_OR_RETURN(step_graph_, StepGraph::Create({options_.accumulation_steps, ranks_.world_size}, ctx_,
                                                    model_.get(), sync_->reducer(), comm_, *data_.train, b,
                                                    options_.model, options_.device));
  }
  return Status::Ok();
}

Status Trainer::ChooseBucketSize() {
  if (!distributed()) {
    if (is_root()) std::printf("ddp_train: --bucket-mb auto: one rank, no gradient buckets to size\n");
    return Status::Ok();
  }
  // A resumed run keeps the buckets it chose (ZeRO's shards follow them).
  if (resumed() && resumed()->manifest().bucket_mb() > 0.0) {
    options_.bucket_mb = resumed()->manifest().bucket_mb();
    if (is_root()) {
      std::printf("ddp_train: --bucket-mb auto: %g MiB, as the run being resumed chose\n", options_.bucket_mb);
    }
    return Status::Ok();
  }
  // This rank's first micro-batch, filled apart from the data stream.
  Batch probe = AllocateBatch(*data_.train, options_.batch_size, Device::Cpu());
  const std::vector<int64_t> indices = sampler_->MicroBatch(start_step_, 0);
  data_.train->Fill(indices.data(), static_cast<int64_t>(indices.size()), sampler_->EpochOf(start_step_), probe);
  probe.step = start_step_;
  if (on_gpu()) {
    for (auto& named : probe.tensors) named.second = named.second.To(ctx_.device());
  }
  BucketAutoOptions auto_options;
  auto_options.first_bucket_mb = options_.first_bucket_mb;
  auto_options.zero_stage = options_.zero_stage;
  auto_options.wire_scale = static_cast<double>(DTypeSize(options_.wire_dtype)) / 4.0;
  auto_options.gpu = on_gpu();
  ASSIGN_OR_RETURN(const BucketChoice choice, ChooseBucketMb(comm_, model_.get(), ctx_, probe, auto_options));
  options_.bucket_mb = choice.bucket_mb;
  if (is_root()) std::printf("ddp_train: %s\n", choice.why.c_str());
  return Status::Ok();
}

StatusOr<Trainer::StepResult> Trainer::TrainStep(int64_t step, float lr, const Status& local_status) {
  const int64_t k = options_.accumulation_steps;
  double loss_sum = 0.0;
  StepResult result;
  input_->StartStep();
  // Counted from this run's first step: a resumed run warms up eagerly too.
  result.graphed = options_.cuda_graphs && step - start_step_ >= StepGraph::kWarmupSteps;
  if (result.graphed) {
    ASSIGN_OR_RETURN(const double mean, ReplayMicroBatches(step));
    loss_sum = mean * static_cast<double>(k);
  }
  // Compute time: forward and backward until the last gradient is ready,
  // input and in-loop collective waits aside; on a GPU between events on
  // the compute stream (host clocks would time the launches).
  const double compute_start = SteadySeconds();
  double in_loop_waits = 0.0;
  const bool gpu_timing = on_gpu() && !result.graphed;
  if (gpu_timing) {
    if (compute_events_[0] == nullptr) {
      for (void*& e : compute_events_) e = cuda::CreateTimingEvent();
    }
    cuda::RecordEvent(compute_events_[0], ctx_.cuda_stream());
  }
  for (int64_t micro = 0; micro < k && !result.graphed; ++micro) {
    // Micro-batch losses are means; the step's gradient is their mean over
    // micro-batches and ranks. Dividing the loss gradient by K x world here
    // makes the reducer's job a plain sum, and N ranks compute exactly what
    // one rank with N micro-batches does.
    // Under loss scaling the gradient carries the scale through backward.
    const double loss_grad = scaler_->scale() / static_cast<double>(k * ranks_.world_size);
    const bool accumulate = micro > 0 && !sync_->reduces_each_micro_batch();
    // The model runs its loss on the batch's named tensors.
    const Batch batch = input_->Next(step, micro);
    result.tokens += batch.real_tokens;
    if (profiler_) profiler_->ForwardStarted();
    loss_sum += model_->ForwardLoss(ctx_, batch).loss;
    if (profiler_) profiler_->ForwardFinished();
    faults_.BetweenForwardAndBackward(step + 1, micro, ranks_.rank, ctx_, batch.first_sample, options_.comm_timeout_s);
    sync_->PrepareForBackward(micro, k);
    const bool last = micro == k - 1;
    if (profiler_) profiler_->BackwardStarted(last);
    if (probe_ && last) probe_->BackwardStarted();
    const double backward_start = SteadySeconds();
    model_->BackwardLoss(ctx_, loss_grad, accumulate);
    if (last) result.last_backward_seconds = SteadySeconds() - backward_start;
    if (probe_ && last) probe_->BackwardFinished();
    if (profiler_) profiler_->BackwardFinished();
    ASSIGN_OR_RETURN(const double exposed, sync_->WaitMicroBatch(micro, k));
    result.exposed_comm_seconds += exposed;
    in_loop_waits += exposed;
  }
  if (gpu_timing) cuda::RecordEvent(compute_events_[1], ctx_.cuda_stream());
  result.compute_seconds = result.graphed && on_gpu()
                               ? -1.0  // a replayed graph: no events inside it
                               : SteadySeconds() - compute_start - input_->wait_seconds() - in_loop_waits;
  result.loss = loss_sum / static_cast<double>(k);
  result.loss_scale = scaler_->scale();
  result.input_wait_seconds = input_->wait_seconds();
  result.replaced_samples = input_->replaced_samples();
  // Whether this rank's gradients are all finite: one check per optimizer
  // step, after reduction, over what the rank holds. Under loss scaling a
  // non-finite step is skipped; without, it stops every rank before the
  // optimizer touches the weights.
  bool nonfinite = false, local_nonfinite = false;
  auto check_gradients = [&] {
    std::vector<Tensor> held = sync_->Held();
    if (faults_.NonfiniteGradientAt(step + 1, ranks_.rank)) {
      for (Tensor& g : held) {
        if (g.numel() == 0) continue;  // an empty ZeRO piece
        Tensor first = g.View(0, {1});
        first.Fill(std::numeric_limits<double>::infinity());
        break;
      }
    }
    for (const Tensor& g : held) nonfinite = nonfinite || !AllFinite(ctx_, g);
    local_nonfinite = nonfinite;
  };
  // Whether the pending checkpoint's files are durable on this rank (a
  // write that finished, checked for its error), without waiting for it.
  const TrainCheckpoints::LocalWrite local_write = checkpoints_ ? checkpoints_->PollLocal() : TrainCheckpoints::LocalWrite();
  const bool written = local_write.durable;
  const Status& write_status = local_write.status;
  if (distributed()) {
    ReduceStats stats;  // a replayed graph has waited for its all-reduces
    // A failed gradient reduction is this rank's error, shared below like
    // any other before it returns: the others must not wait for it.
    const double wait_start = SteadySeconds();
    StatusOr<ReduceStats> waited = sync_->Wait(result.graphed);
    Timeline::Get().Add("wait for gradients", "wait", Timeline::kCommTrack, wait_start, SteadySeconds() - wait_start);
    if (waited.ok()) RunTimeline::AddBucketEvents(*waited, sync_->collective());
    if (waited.ok()) stats = *waited;
    // A collective that failed on this rank leaves the communicator in no
    // state to agree on anything, and peers may be waiting inside it: the
    // job ends here, with the reason.
    if (!waited.ok()) {
      CollectiveWatchdog::EndJob("gradient reduction failed at step " + std::to_string(step + 1) + ": " +
                                 waited.status().message() + "; ending the job");
    }
    const Status step_status = !local_status.ok() ? local_status : (waited.ok() ? Status::Ok() : waited.status());
    result.exposed_comm_seconds += stats.exposed_seconds;
    result.buckets = stats.buckets;
    check_gradients();
    // The step's loss, whether any rank hit a local error, and whether any
    // rank saw non-finite gradients, decided together: no rank stops or
    // skips a step alone (under ZeRO each rank checks only its pieces).
    // And how the pending checkpoint's write stands on each rank: every
    // rank's files durable (rank 0 commits after the step), or one failed.
    StepVotes mine;
    mine.loss = result.loss;
    mine.failed = step_status.ok() ? 0 : 1;
    mine.nonfinite = nonfinite ? 1 : 0;
    mine.tokens = result.tokens;
    mine.checkpoint_durable = written && write_status.ok() ? 1 : 0;
    mine.checkpoint_failed = write_status.ok() ? 0 : 1;
    mine.stop = PreemptionSignal() != 0 ? 1 : 0;
    mine.input_wait_s = result.input_wait_seconds;
    mine.replaced_samples = result.replaced_samples;
    const double shared_start = SteadySeconds();
    ASSIGN_OR_RETURN(const StepVotes all, SumStepVotes(comm_, mine));
    result.comm_wait_seconds = stats.exposed_seconds + in_loop_waits + (SteadySeconds() - shared_start);
    if (!step_status.ok()) return step_status;
    if (all.failed > 0) return FailedPrecondition("another rank failed; stopping");
    if (!write_status.ok()) return write_status;
    if (all.checkpoint_failed > 0) {
      return FailedPrecondition("another rank failed to write the checkpoint of step " +
                                std::to_string(checkpoints_->pending_step()) + "; stopping");
    }
    result.loss = all.loss / ranks_.world_size;
    nonfinite = all.nonfinite > 0;
    result.tokens = all.tokens;
    result.checkpoint_ready = all.checkpoint_durable == ranks_.world_size;
    result.stop = all.stop > 0;
    result.input_wait_seconds = all.input_wait_s / ranks_.world_size;
    result.replaced_samples = all.replaced_samples;
  } else if (!local_status.ok()) {
    return local_status;
  } else {
    check_gradients();
    result.stop = PreemptionSignal() != 0;
    RETURN_IF_ERROR(write_status);
    result.checkpoint_ready = written;
  }
  if (nonfinite && !scaler_->enabled()) {
    const std::string where = " at step " + std::to_string(step + 1);
    if (!local_nonfinite) {
      return FailedPrecondition("another rank found a non-finite gradient" + where +
                                "; stopping before the optimizer step");
    }
    return FailedPrecondition("non-finite gradient" + where + " on rank " + std::to_string(ranks_.rank) +
                              ", first in '" + sync_->FirstNonFinite(ctx_) +
                              "'; stopping before the optimizer step touches the weights (look for NaN or Inf in "
                              "the data, or lower --lr)");
  }
  // The step's reductions waited on the GPU past its backward (with
  // several ranks), so its events have happened; -1 where not yet.
  if (gpu_timing) result.compute_seconds = cuda::ElapsedSeconds(compute_events_[0], compute_events_[1]);
  if (!std::isfinite(result.loss)) {
    // Under loss scaling an overflowing forward (fp16) skips the step, as
    // GradScaler does; every rank sees the same all-reduced loss. Without
    // it, a non-finite loss means divergence.
    if (!scaler_->enabled()) {
      return FailedPrecondition("loss is " + std::to_string(result.loss) + " at step " + std::to_string(step + 1) +
                                "; try a lower --lr");
    }
    nonfinite = true;
  }
  result.skipped = scaler_->Update(nonfinite);
  // A skipped step leaves weights, optimizer state and (ZeRO) the gathered
  // parameters as they were; the next step overwrites the gradients.
  if (result.skipped) return result;
  if (result.loss_scale != 1.0) {
    // Unscaled before clipping and the update, as GradScaler.unscale_.
    for (Tensor& g : sync_->Held()) Scale(ctx_, static_cast<float>(1.0 / result.loss_scale), g);
  }
  if (options_.clip_grad_norm > 0.0) RETURN_IF_ERROR(sync_->ClipToNorm(ctx_, options_.clip_grad_norm));
  {
    const TimelineScope timed(ctx_, "optimizer step", "optimizer");
    RETURN_IF_ERROR(optimizer_->Step(ctx_, lr));
  }
  RETURN_IF_ERROR(sync_->AfterUpdate(ctx_));
  return result;
}

StatusOr<double> Trainer::ReplayMicroBatches(int64_t step) {
  for (int64_t micro = 0; micro < options_.accumulation_steps; ++micro) {
    input_->FillInto(step, micro, step_graph_->input(micro));
  }
  return step_graph_->Replay(scaler_->scale());
}

void Trainer::PrintStateDigest(int64_t step) {
  // Under ZeRO only this rank's pieces of the master weights are current.
  ddp::PrintStateDigest(ranks_.rank, step + 1, sync_->MasterWeights(), optimizer_->state(), optimizer_->steps(),
                        scaler_->scale());
}

StatusOr<double> Trainer::Evaluate() {
  RETURN_IF_ERROR(sync_->FinishGather());
  EvaluatorOptions e;
  e.batch_size = options_.batch_size;
  e.rank = ranks_.rank;
  e.world_size = ranks_.world_size;
  e.print_digest = faults_.print_state_digest;
  ASSIGN_OR_RETURN(const Evaluation evaluation,
                   ddp::Evaluate(ctx_, *model_, *data_.eval, comm_, e, optimizer_->steps()));
  eval_label_ = evaluation.label;
  return evaluation.accuracy;
}

StatusOr<TrainResult> Trainer::Run() {
  const int64_t samples_per_step = sampler_->global_batch();
  const bool has_eval = data_.eval != nullptr;
  // Token data: positions per sample (tokens/s counts padding too); 0 for images.
  const int64_t seq_len = data_.train->tokens_per_sample();
  const char* noun = data_.train->sample_noun();
  if (is_root()) {
    std::printf("ddp_train: %s, %lld parameters, %d rank%s x %d threads on %s, batch %lld x %lld micro-batches per rank, "
                "%lld steps, %s lr %g, %s\n",
                options_.model.c_str(), static_cast<long long>(model_->num_parameters()), ranks_.world_size,
                ranks_.world_size == 1 ? "" : "s", ctx_.num_threads(), options_.device.c_str(),
                static_cast<long long>(options_.batch_size),
                static_cast<long long>(options_.accumulation_steps), static_cast<long long>(total_steps_),
                options_.optimizer.c_str(), options_.lr, data_.train->Describe().c_str());
    std::fflush(stdout);
  }
  // Untimed: two eager steps (allocation, algorithm search), and under
  // --cuda-graphs the step that captures the graph as well.
  const int64_t warmup =
      std::min<int64_t>(options_.cuda_graphs ? StepGraph::kWarmupSteps + 1 : 2, total_steps_ - start_step_ - 1);
  double timed_seconds = 0.0, timed_exposed = 0.0, timed_input_wait = 0.0;
  int64_t timed_tokens = 0;  // token data: non-padding tokens of the timed steps
  int64_t timed_count = 0, replaced_samples = 0;
  bool warned_input = false;
  std::vector<double> compute_times, wait_times;  // this rank's, per timed step
  // Everything allocated from here on is per-step working memory
  // (activations, their gradients, transient buffers).
  Allocator* memory = GetAllocator(ctx_.device());  // the rank's device: host or GPU
  const int64_t persistent_in_use = memory->bytes_in_use();
  const int64_t setup_peak = memory->peak_bytes_in_use();
  memory->ResetPeak();
  TrainResult result;
  Status local;  // this rank's own trouble (a failed metrics write), shared at the next step
  int64_t skipped = 0;  // steps skipped for non-finite gradients (every rank counts the same)
  progress_ = ProgressPrinter(options_.log_every, StdoutIsATerminal());
  const double run_start = SteadySeconds();
  if (timeline_.enabled()) RETURN_IF_ERROR(timeline_.Start(comm_, ctx_));
  for (int64_t step = start_step_; step < total_steps_; ++step) {
    CollectiveWatchdog::SetPhase("step " + std::to_string(step + 1));
    Timeline::Get().SetStep(step + 1, step + 1 >= options_.timeline_first && step + 1 <= options_.timeline_last);
    const float lr = static_cast<float>(options_.schedule.At(step));
    if (probe_) RETURN_IF_ERROR(probe_->StepStarting(step - start_step_ >= warmup));
    const auto start = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(const StepResult r, TrainStep(step, lr, local));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (probe_) RETURN_IF_ERROR(probe_->StepFinished(r.last_backward_seconds));
    if (profiler_) profiler_->StepFinished(seconds, step - start_step_ >= warmup);
    if (step - start_step_ >= warmup) {
      timed_seconds += seconds;
      timed_exposed += r.exposed_comm_seconds;
      timed_tokens += r.tokens;
      timed_input_wait += r.input_wait_seconds;
      ++timed_count;
      if (r.compute_seconds >= 0.0) compute_times.push_back(r.compute_seconds);
      wait_times.push_back(r.comm_wait_seconds);
    }
    replaced_samples += r.replaced_samples;
    result.final_loss = r.loss;
    if (r.skipped) ++skipped;
    if (faults_.print_state_digest) PrintStateDigest(step);
    nlohmann::ordered_json record = {{"step", step + 1},
                                     {"loss", r.loss},
                                     {"lr", lr},
                                     {"step_time_s", seconds},
                                     {"samples_per_s", samples_per_step / seconds}};
    if (seq_len > 0) {
      // Every position of the batch, padding included; and the real ones.
      record["tokens_per_s"] = static_cast<double>(samples_per_step * seq_len) / seconds;
      record["real_tokens_per_s"] = static_cast<double>(r.tokens) / seconds;
    }
    if (scaler_->enabled()) {
      record["loss_scale"] = r.loss_scale;
      record["skipped"] = r.skipped;
    }
    if (r.graphed) record["cuda_graph"] = true;
    record["input_wait_s"] = r.input_wait_seconds;
    if (r.replaced_samples > 0) record["replaced_samples"] = r.replaced_samples;
    // Checkpoints: the pending one, once every rank's files are durable, is
    // committed by rank 0; every --checkpoint-every steps a new one starts,
    // stalling the step only for the copy to host memory (and for the
    // previous write, if it is still going).
    if (r.checkpoint_ready) {
      const int64_t committed_step = checkpoints_->pending_step();
      const Status committed = checkpoints_->Commit();
      if (committed.ok() && is_root()) record["checkpoint_committed"] = committed_step;
      if (!committed.ok() && local.ok()) local = committed;  // every rank learns of it at the next step
    }
    // Preempted: every rank stops after this step, with a checkpoint of it.
    // (A signal during the last step changes nothing: the run finishes.)
    const bool stop = r.stop && step + 1 < total_steps_;
    if (stop) result.preempted_at_step = step + 1;
    if (checkpoints_ && checkpoints_->Due(step + 1, stop)) {
      const auto stall_start = std::chrono::steady_clock::now();
      RETURN_IF_ERROR(checkpoints_->Begin(step + 1));
      const double stall = std::chrono::duration<double>(std::chrono::steady_clock::now() - stall_start).count();
      record["checkpoint_stall_s"] = stall;
      Timeline::Get().Add("checkpoint stall", "checkpoint", Timeline::kComputeTrack, SteadySeconds() - stall, stall);
      // Throughput counts what checkpoints cost the run.
      if (step - start_step_ >= warmup) timed_seconds += stall;
    }
    if (distributed() && !r.graphed) {  // a replayed step has no bucket timings
      record["exposed_comm_s"] = r.exposed_comm_seconds;
      // Per bucket, in launch order: seconds after backward began that it
      // launched and finished, and how long the step waited on it.
      nlohmann::ordered_json buckets = nlohmann::ordered_json::array();
      for (const BucketTiming& b : r.buckets) {
        buckets.push_back({{"launched_s", b.launched}, {"finished_s", b.finished}, {"waited_s", b.waited}});
      }
      record["buckets"] = buckets;
    }
    // Not on the step a preemption stops at: the checkpoint commits after
    // the loop, and the grace before SIGKILL is short.
    const bool evaluate = has_eval && options_.eval_every > 0 && (step + 1) % options_.eval_every == 0 &&
                          step + 1 < total_steps_ && !stop;
    double accuracy = 0.0;
    if (evaluate) {
      ASSIGN_OR_RETURN(accuracy, Evaluate());
      record["eval_accuracy"] = accuracy;
    }
    if (is_root()) {
      const double now = SteadySeconds();
      const bool keep = evaluate || r.skipped;
      if (progress_.Due(step + 1, total_steps_, keep, now)) {
        // The time left, at this run's pace so far (evaluations and
        // checkpoints included).
        const double per_step = (now - run_start) / static_cast<double>(step + 1 - start_step_);
        char line[512];
        int at = std::snprintf(line, sizeof(line), "step %5lld/%lld  loss %.4f  lr %.5f  %.3f s  %.1f %s/s",
                               static_cast<long long>(step + 1), static_cast<long long>(total_steps_), r.loss, lr,
                               seconds, samples_per_step / seconds, noun);
        auto add = [&](const char* format, auto... values) {
          at += std::snprintf(line + at, sizeof(line) - static_cast<size_t>(at), format, values...);
        };
        if (seq_len > 0) add("  %.0f tokens/s", static_cast<double>(samples_per_step * seq_len) / seconds);
        if (distributed() && !r.graphed) add("  exposed comm %.3f s", r.exposed_comm_seconds);
        if (r.graphed) add("  cuda graph");
        if (scaler_->enabled()) add("  loss scale %g", r.loss_scale);
        if (r.skipped) add("  skipped: non-finite gradients");
        if (evaluate) add("  eval %s %.4f", eval_label_.c_str(), accuracy);
        if (step + 1 < total_steps_) {
          add("  ETA %s", FormatDuration(per_step * static_cast<double>(total_steps_ - step - 1)).c_str());
        }
        progress_.Print(line, keep, now);
      }
      const Status written = metrics_.Write(record);
      if (local.ok()) local = written;
      const Status plotted = tensorboard_.AddScalars(step + 1, TensorBoardScalars(record));
      if (local.ok()) local = plotted;
      // Input that keeps the step waiting: said once, over the timed steps
      // (five at least, or the whole run).
      if (!warned_input && timed_count > 0 && (timed_count >= 5 || step + 1 == total_steps_) &&
          timed_input_wait > kInputWaitWarnShare * timed_seconds) {
        progress_.EndLine();
        std::printf("ddp_train: warning: waiting for input took %.1f%% of step time over %lld steps (above %.0f%%): "
                    "the data loader is the bottleneck; raise --loader-threads (now %d) or --prefetch (now %d)\n",
                    100.0 * timed_input_wait / timed_seconds, static_cast<long long>(timed_count),
                    100.0 * kInputWaitWarnShare, options_.loader_threads, options_.prefetch);
        std::fflush(stdout);
        warned_input = true;
      }
    }
    if (stop) break;
  }
  CollectiveWatchdog::SetPhase("the end of the run");
  MarkPreemptionAnswered();  // a signal's step boundary, or the run's end
  progress_.EndLine();
  if (timeline_.enabled()) RETURN_IF_ERROR(timeline_.Write(comm_, total_steps_));
  if (health_) {
    health_->Stop();
    const ThrottleTracker& t = health_->tracker();
    gpu_summary_["samples"] = t.samples();
    gpu_summary_["throttled_s"] = t.throttled_seconds(health_->stopped_at());
    gpu_summary_["max_temperature_c"] = t.max_temperature_c();
    gpu_summary_["min_sm_clock_mhz"] = t.min_sm_clock_mhz();
    gpu_summary_["max_power_w"] = t.max_power_w();
  }
  // A metrics write that failed after the last step (rank 0 only): decided
  // together, so no rank goes on alone into evaluation's collectives.
  RETURN_IF_ERROR(AgreeOnStatus(comm_, local, "another rank failed; stopping"));
  // The last checkpoint's write, waited for and committed.
  if (checkpoints_ && checkpoints_->pending()) RETURN_IF_ERROR(checkpoints_->Finish());
  ASSIGN_OR_RETURN(const RankTimes rank_times, GatherRankTimes(comm_, compute_times, wait_times));
  // The last update, before eval and saving; after 16-bit gathers the f32
  // master weights too, so every rank holds all of them.
  RETURN_IF_ERROR(sync_->GatherMasterWeights());
  const bool preempted = result.preempted_at_step >= 0;
  const int64_t end_step = preempted ? result.preempted_at_step : total_steps_;
  const int64_t timed_steps = std::max<int64_t>(1, end_step - start_step_ - warmup);
  result.compute_dtype = compute_dtype_;
  result.skipped_steps = skipped;
  result.samples_per_s = timed_seconds > 0.0 ? timed_steps * samples_per_step / timed_seconds : 0.0;
  result.preemption_signal = PreemptionSignal();
  // A preempted run is not finished: its checkpoint holds the state, and
  // neither --save-weights nor the final evaluation runs.
  if (!options_.save_weights.empty() && is_root() && !preempted) {
    // Never a file of NaN weights without an error.
    for (const auto& [name, t] : model_->StateDict()) {
      if (t.dtype() == DType::kF32 && !AllFinite(ctx_, t)) {
        return FailedPrecondition("--save-weights " + options_.save_weights + ": tensor '" + name +
                                  "' holds non-finite values; not written");
      }
    }
    std::vector<NamedTensor> named;
    for (auto& [name, t] : model_->StateDict()) named.push_back({name, t.To(Device::Cpu())});
    Status saved = WriteSafetensors(options_.save_weights, named, {{"format", "pt"}, {"model", options_.model}});
    if (!saved.ok()) return Status(saved.code(), "--save-weights " + saved.message());
  }
  // After the weights are safe: an evaluation that fails loses no training.
  if (has_eval && !preempted) {
    ASSIGN_OR_RETURN(result.eval_accuracy, Evaluate());
  }
  if (!is_root()) return result;
  if (profiler_) {
    StepProfile profile = profiler_->Summary();
    if (profile.timed_steps == 0) {
      return FailedPrecondition("--profile-file " + options_.profile_file + ": no timed step to profile (run more steps)");
    }
    profile.model = options_.model;
    profile.device = options_.device;
    if (gpu_summary_.contains("peer_access")) profile.peer_access = gpu_summary_["peer_access"]["state"];
    profile.world_size = ranks_.world_size;
    profile.threads = ctx_.num_threads();
    profile.accumulation_steps = options_.accumulation_steps;
    profile.samples_per_step = samples_per_step;
    nlohmann::ordered_json json = StepProfileJson(profile);
    json["precision"] = options_.precision;
    json["batch_size"] = options_.batch_size;
    json["image_size"] = options_.image_size;
    json["seq_len"] = seq_len;
    const Status written = ReplaceFileAtomically(options_.profile_file, json.dump(1) + "\n");
    if (!written.ok()) return Status(written.code(), "--profile-file " + written.message());
  }

  RunSummary summary;
  summary.model = options_.model;
  summary.device = options_.device;
  summary.precision = options_.precision;
  summary.compute_dtype = DTypeName(compute_dtype_);
  summary.memory_format = model_->channels_last() ? "channels_last" : "contiguous";
  summary.world_size = ranks_.world_size;
  summary.batch_size = options_.batch_size;
  summary.accumulation_steps = options_.accumulation_steps;
  summary.zero_stage = sync_->zero_stage();
  summary.steps = end_step;
  summary.total_steps = total_steps_;
  summary.warmup_steps = warmup;
  summary.samples_per_s = result.samples_per_s;
  summary.final_loss = result.final_loss;
  summary.noun = noun;
  summary.distributed = distributed();
  summary.bucket_mb = options_.bucket_mb;
  // Replayed steps have no bucket timings: exposed communication is
  // reported for eager runs only.
  if (distributed() && !options_.cuda_graphs) summary.exposed_comm_s = timed_exposed / timed_steps;
  if (step_graph_) summary.cuda_graph_captures = step_graph_->captures();
  if (sync_->zero()) summary.zero_gather_dtype = DTypeName(sync_->zero()->gather_dtype());
  summary.loss_scaling = scaler_->enabled();
  summary.loss_scale = scaler_->scale();
  summary.skipped_steps = skipped;
  summary.max_skipped_share = options_.max_skipped_share;
  if (preempted) summary.preempted_at_step = end_step;
  summary.compute_s = Spread(rank_times.compute);
  summary.comm_wait_s = Spread(rank_times.wait);
  for (const std::string& line : StragglerWarnings(rank_times)) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  summary.gpu_health = gpu_summary_;
  summary.input_wait_s = timed_input_wait / timed_steps;  // per timed step, the mean over ranks
  summary.input_wait_share = timed_seconds > 0.0 ? timed_input_wait / timed_seconds : 0.0;
  summary.loader_threads = options_.loader_threads;
  summary.reads_files = data_.train->ReadsFiles();
  summary.replaced_samples = replaced_samples;
  if (has_eval && !preempted) summary.eval_accuracy = result.eval_accuracy;  // the model's first count
  summary.eval_label = eval_label_;
  summary.seq_len = seq_len;
  summary.real_tokens_per_s = static_cast<double>(timed_tokens) / timed_seconds;
  MemoryFigures& m = summary.memory;
  m.param_bytes = static_cast<int64_t>(model_->flat_parameters().nbytes());
  m.grad_bytes = sync_->gradient_bytes();
  m.optimizer_bytes = optimizer_->state_bytes();
  m.transient_bucket_bytes = sync_->transient_bytes();
  m.activation_peak_bytes = memory->peak_bytes_in_use() - persistent_in_use;
  m.peak_bytes = std::max(setup_peak, memory->peak_bytes_in_use());
  m.allocated_bytes = memory->bytes_in_use();
  m.reserved_bytes = memory->reserved_bytes();
  m.peak_resident_bytes = PeakResidentBytes();
  RETURN_IF_ERROR(metrics_.Write({{"summary", SummaryJson(summary)}}));
  RETURN_IF_ERROR(tensorboard_.AddScalars(end_step, SummaryScalars(summary)));
  std::fputs(SummaryText(summary).c_str(), stdout);
  return result;
}

}  // namespace ddp
