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
#include "launch/output_paths.h"
#include "launch/preemption.h"
#include "launch/rank_times.h"
#include "launch/run_reporter.h"
#include "launch/step_agreement.h"
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
  DestroyStepGraph();
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
  if (!options_.checkpoint_dir.empty() && is_root()) {
    // Before any training: a typo in the path costs seconds, not a run.
    RETURN_IF_ERROR(Checkpointer::PrepareDirectory(options_.checkpoint_dir, options_.resume));
  }
  if (!options_.checkpoint_dir.empty()) {  // periodic checkpoints, and one on preemption
    checkpointer_ = std::make_unique<Checkpointer>(options_.checkpoint_dir, ranks_.rank,
                                                   static_cast<int>(options_.checkpoint_keep),
                                                   faults_.checkpoint_crash);
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
  RETURN_IF_ERROR(ResumeModel());
  if (resume_from_ && !options_.load_weights.empty() && is_root()) {
    std::printf("ddp_train: --load-weights %s: not read; the checkpoint holds the weights\n",
                options_.load_weights.c_str());
  }
  if (!options_.load_weights.empty() && !resume_from_) {
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
  std::vector<OptimizerSlot> slots;
  if (distributed() && options_.zero_stage >= 1) {
    // ZeRO: gradients move into padded bucket buffers, and the optimizer
    // sees only this rank's pieces.
    ZeroOptions zero;
    zero.stage = options_.zero_stage;
    zero.bucket_mb = options_.bucket_mb;
    zero.first_bucket_mb = options_.first_bucket_mb;
    zero.overlap = options_.overlap;
    zero.wire_dtype = options_.wire_dtype;
    if (options_.zero_gather_low_precision) zero.gather_dtype = compute_dtype_;
    zero.ctx = ctx_;
    zero_ = std::make_unique<ZeroReducer>(comm_, model_.get(), zero);
    slots = zero_->OptimizerSlots(weight_decay);
  } else {
    int index = 0;
    for (Parameter* p : model_->parameters()) {
      slots.push_back({p->name, p->value, p->grad, weight_decay(*p), index++});
      grads_.push_back(p->grad);
    }
  }
  for (const OptimizerSlot& slot : slots) slot_places_.push_back({slot.name, slot.offset, slot.value.numel()});
  if (options_.optimizer == "sgd") {
    SgdOptions sgd;
    sgd.momentum = static_cast<float>(options_.momentum);
    sgd.nesterov = options_.nesterov;
    optimizer_ = MakeSgd(std::move(slots), sgd);
  } else if (options_.optimizer == "adamw") {
    optimizer_ = MakeAdamW(std::move(slots), AdamWOptions());
  } else {
    // Sharded, a parameter's trust-ratio norms sum over every rank's pieces.
    AllReduceSum all_reduce;
    if (zero_) all_reduce = [this](Tensor& t) { return comm_->AllReduce(t, ReduceOp::kSum)->Wait(); };
    optimizer_ = MakeLamb(std::move(slots), LambOptions(), static_cast<int>(model_->parameters().size()), all_reduce);
  }
  if (resume_from_) RETURN_IF_ERROR(ResumeOptimizer());
  if (checkpointer_) PrepareStaging();
  // A resumed run continues the metrics of the run it resumes.
  if (!options_.metrics_file.empty() && is_root()) {
    RETURN_IF_ERROR(resume_from_ ? metrics_.OpenResumed(options_.metrics_file, start_step_)
                                 : metrics_.Open(options_.metrics_file));
  }
  if (distributed() && !zero_) {
    ReducerOptions reducer;
    reducer.bucket_mb = options_.bucket_mb;
    reducer.first_bucket_mb = options_.first_bucket_mb;
    reducer.overlap = options_.overlap;
    reducer.wire_dtype = options_.wire_dtype;
    reducer.gradients_prescaled = true;  // TrainStep divides the loss gradient by the world size
    reducer.ctx = ctx_;
    reducer_ = std::make_unique<Reducer>(comm_, model_.get(), reducer);
  }
  // Installed last: it passes each gradient on to the reducer's hook.
  if (!options_.profile_file.empty() && is_root()) {
    profiler_ = std::make_unique<StepProfiler>(model_.get(), on_gpu() ? ctx_.cuda_stream() : nullptr);
  }

  const int64_t b = options_.batch_size;
  if (on_gpu() && data_.train->GeneratesOnDevice()) {
    // Synthetic data is made on the GPU, in place, each micro-batch: no host
    // work, no copy (the benchmark measures training).
    batch_ = AllocateBatch(*data_.train, b, ctx_.device());
  } else if (on_gpu() || data_.train->ReadsFiles()) {
    // Filled ahead by the loader: into pinned buffers copied to the GPU on
    // a stream of their own, or on a CPU rank, host batches decoded while
    // the step computes.
    stager_ = std::make_unique<BatchStager>(data_.train.get(), b, on_gpu() ? ctx_.device().index : -1,
                                            ctx_.cuda_stream(), options_.prefetch);
  } else {
    batch_ = AllocateBatch(*data_.train, b, Device::Cpu());  // in memory or generated: filled in place
  }
  if (options_.cuda_graphs) {
    // ddp_train has refused CPU ranks, MPI between several ranks, and ZeRO.
    CHECK(on_gpu() && !zero_) << "--cuda-graphs on " << options_.device << (zero_ ? " with ZeRO" : "");
    if (!cuda::GetMemoryStats(ctx_.device().index).pooled) {
      return FailedPrecondition("--cuda-graphs needs CUDA's stream-ordered memory pool (cudaMallocAsync), which " +
                                options_.device + " lacks or DDP_CUDA_ALLOCATOR=caching turned off");
    }
    if (model_->loss_stats_size() == 0) {
      return Unimplemented("--cuda-graphs with --model " + options_.model +
                           ": its loss is read on the host within the step; use eager steps");
    }
    for (int64_t micro = 0; micro < options_.accumulation_steps; ++micro) {
      graph_batches_.push_back(AllocateBatch(*data_.train, b, ctx_.device()));
    }
    graph_losses_ = Tensor::Empty({options_.accumulation_steps, model_->loss_stats_size()}, DType::kF64,
                                  ctx_.device());
  }
  return Status::Ok();
}

Status Trainer::ChooseBucketSize() {
  if (!distributed()) {
    if (is_root()) std::printf("ddp_train: --bucket-mb auto: one rank, no gradient buckets to size\n");
    return Status::Ok();
  }
  // A resumed run keeps the buckets it chose (ZeRO's shards follow them).
  if (resume_from_ && resume_from_->manifest().bucket_mb() > 0.0) {
    options_.bucket_mb = resume_from_->manifest().bucket_mb();
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

int64_t Trainer::FirstSample(int64_t micro) const {
  return (micro * ranks_.world_size + ranks_.rank) * options_.batch_size;
}

Batch Trainer::LoadMicroBatch(int64_t step, int64_t micro) {
  const int64_t k = options_.accumulation_steps;
  const double load_start = SteadySeconds();
  Batch batch;
  if (!stager_) {
    const double start = SteadySeconds();
    const std::vector<int64_t> indices = sampler_->MicroBatch(step, micro);
    if (batch_.tensors.front().second.device().is_cuda()) {
      // Generated data: the sampler's indices are consecutive.
      data_.train->FillRangeOnDevice(ctx_, indices.front(), batch_);
    } else {
      data_.train->Fill(indices.data(), static_cast<int64_t>(indices.size()), sampler_->EpochOf(step), batch_);
    }
    batch = batch_;
    input_wait_seconds_ += SteadySeconds() - start;
  } else {
    // Micro-batches are consumed in run order, so the stager's queue always
    // starts at this one: keep it as full as it goes, within the run.
    CHECK_EQ(prefetched_ - stager_->queued(), step * k + micro) << "micro-batches out of order";
    auto top_up = [&] {
      while (prefetched_ < total_steps_ * k && stager_->queued() < stager_->depth()) {
        const int64_t s = prefetched_ / k;
        stager_->Prefetch(sampler_->MicroBatch(s, prefetched_ % k), sampler_->EpochOf(s));
        ++prefetched_;
      }
    };
    top_up();
    batch = stager_->Next();
    input_wait_seconds_ += stager_->last_wait_seconds();
    top_up();
  }
  replaced_samples_ += batch.replaced_samples;
  Timeline::Get().Add("input", "input", Timeline::kDataTrack, load_start, SteadySeconds() - load_start);
  batch.step = step;
  batch.first_sample = FirstSample(micro);
  return batch;
}

StatusOr<Trainer::StepResult> Trainer::TrainStep(int64_t step, float lr, const Status& local_status) {
  const int64_t k = options_.accumulation_steps;
  double loss_sum = 0.0;
  StepResult result;
  input_wait_seconds_ = 0.0;
  replaced_samples_ = 0;
  // Counted from this run's first step: a resumed run warms up eagerly too.
  result.graphed = options_.cuda_graphs && step - start_step_ >= kGraphWarmupSteps;
  // ZeRO-2 reduce-scatters every micro-batch into the gradient pieces;
  // otherwise gradients accumulate locally and are reduced once.
  const bool reduce_each_micro_batch = zero_ && options_.zero_stage == 2;
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
    const bool accumulate = micro > 0 && !reduce_each_micro_batch;
    auto prepare_reduction = [&] {
      if (reducer_) reducer_->PrepareForBackward(/*sync=*/micro == k - 1);
      if (zero_) zero_->PrepareForBackward(/*sync=*/reduce_each_micro_batch || micro == k - 1, micro == 0);
    };
    // The model runs its loss on the batch's named tensors.
    const Batch batch = LoadMicroBatch(step, micro);
    result.tokens += batch.real_tokens;
    if (profiler_) profiler_->ForwardStarted();
    loss_sum += model_->ForwardLoss(ctx_, batch).loss;
    if (profiler_) profiler_->ForwardFinished();
    faults_.BetweenForwardAndBackward(step + 1, micro, ranks_.rank, ctx_, batch.first_sample, options_.comm_timeout_s);
    prepare_reduction();
    const bool last = micro == k - 1;
    if (profiler_) profiler_->BackwardStarted(last);
    if (probe_ && last) probe_->BackwardStarted();
    const double backward_start = SteadySeconds();
    model_->BackwardLoss(ctx_, loss_grad, accumulate);
    if (last) result.last_backward_seconds = SteadySeconds() - backward_start;
    if (probe_ && last) probe_->BackwardFinished();
    if (profiler_) profiler_->BackwardFinished();
    if (reduce_each_micro_batch && micro < k - 1) {
      ASSIGN_OR_RETURN(const ReduceStats stats, zero_->Wait());
      result.exposed_comm_seconds += stats.exposed_seconds;
      in_loop_waits += stats.exposed_seconds;
    }
  }
  if (gpu_timing) cuda::RecordEvent(compute_events_[1], ctx_.cuda_stream());
  result.compute_seconds = result.graphed && on_gpu()
                               ? -1.0  // a replayed graph: no events inside it
                               : SteadySeconds() - compute_start - input_wait_seconds_ - in_loop_waits;
  result.loss = loss_sum / static_cast<double>(k);
  result.loss_scale = scaler_->scale();
  result.input_wait_seconds = input_wait_seconds_;
  result.replaced_samples = replaced_samples_;
  // Whether this rank's gradients are all finite: one check per optimizer
  // step, after reduction, over what the rank holds. Under loss scaling a
  // non-finite step is skipped; without, it stops every rank before the
  // optimizer touches the weights.
  bool nonfinite = false, local_nonfinite = false;
  auto check_gradients = [&] {
    std::vector<Tensor> held = HeldGradients();
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
  const bool written = checkpointer_ && checkpointer_->pending() && checkpointer_->LocalDone();
  const Status write_status = written ? checkpointer_->WaitLocal() : Status::Ok();
  if (distributed()) {
    ReduceStats stats;  // a replayed graph has waited for its all-reduces
    // A failed gradient reduction is this rank's error, shared below like
    // any other before it returns: the others must not wait for it.
    const double wait_start = SteadySeconds();
    StatusOr<ReduceStats> waited = zero_ ? zero_->Wait() : (result.graphed ? StatusOr<ReduceStats>(stats)
                                                                           : reducer_->Wait());
    Timeline::Get().Add("wait for gradients", "wait", Timeline::kCommTrack, wait_start, SteadySeconds() - wait_start);
    if (waited.ok()) RunTimeline::AddBucketEvents(*waited, zero_ ? "reduce-scatter" : "all-reduce");
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
                                std::to_string(checkpointer_->pending_step()) + "; stopping");
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
                              ", first in '" + FirstNonFiniteGradient() +
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
    for (Tensor& g : HeldGradients()) Scale(ctx_, static_cast<float>(1.0 / result.loss_scale), g);
  }
  if (options_.clip_grad_norm > 0.0) {
    // Under ZeRO the global norm is the sum of every rank's pieces' squared
    // norms, and each rank scales its own pieces.
    double squared = 0.0;
    if (zero_) {
      ASSIGN_OR_RETURN(squared, zero_->GlobalGradientSquaredNorm(ctx_));
    } else {
      squared = GradientSquaredNorm(ctx_, grads_);
    }
    ClipGradientsToNorm(ctx_, zero_ ? zero_->GradientPieces() : grads_, std::sqrt(squared), options_.clip_grad_norm);
  }
  {
    const TimelineScope timed(ctx_, "optimizer step", "optimizer");
    RETURN_IF_ERROR(optimizer_->Step(ctx_, lr));
  }
  // The updated pieces travel while the next step loads data and runs its
  // forward, which waits for each bucket as it reaches its parameters (and
  // rounds it into the low-precision copy there).
  if (zero_) {
    RETURN_IF_ERROR(zero_->LaunchParameterGather());
  } else {
    model_->RefreshLowPrecision(ctx_);
  }
  return result;
}

StatusOr<double> Trainer::ReplayMicroBatches(int64_t step) {
  const int64_t k = options_.accumulation_steps;
  void* stream = ctx_.cuda_stream();
  for (int64_t micro = 0; micro < k; ++micro) {
    Batch& inputs = graph_batches_[micro];
    if (stager_) {
      CopyBatch(ctx_, LoadMicroBatch(step, micro), inputs);
    } else {
      // Generated on the device: the sampler's indices are consecutive.
      data_.train->FillRangeOnDevice(ctx_, sampler_->MicroBatch(step, micro).front(), inputs);
      inputs.step = step;
      inputs.first_sample = FirstSample(micro);
    }
  }
  if (graph_ != nullptr && graph_scale_ != scaler_->scale()) DestroyStepGraph();
  if (graph_ == nullptr) {
    cuda::TrimMemoryPools(ctx_.device().index);
    const Status captured = CaptureMicroBatches(scaler_->scale());
    // A rank that failed to capture would leave its peers waiting inside
    // their graphs' collectives: decided together.
    const Status agreed =
        AgreeOnStatus(comm_, captured, "another rank failed to capture its CUDA graph; stopping");
    if (captured.ok() && !agreed.ok()) DestroyStepGraph();
    RETURN_IF_ERROR(agreed);
    graph_scale_ = scaler_->scale();
    ++graph_captures_;
  }
  cuda::LaunchGraph(graph_, stream);
  double loss_sum = 0.0;
  const int64_t n = model_->loss_stats_size();
  for (int64_t micro = 0; micro < k; ++micro) {
    loss_sum += model_->ReadLoss(ctx_, graph_losses_.View(n * micro, {n}), graph_batches_[micro]).loss;
  }
  return loss_sum / static_cast<double>(k);
}

Status Trainer::CaptureMicroBatches(double loss_scale) {
  const int64_t k = options_.accumulation_steps;
  void* stream = ctx_.cuda_stream();
  // The allocator turns allocations into the graph's own when the device's
  // current stream is being captured: it must be this one.
  CHECK(cuda::CurrentStream(ctx_.device().index) == stream) << "capturing on a stream that is not the current one";
  // Scratch buffers the graph's kernels use stay referenced by graph_ctx_
  // for as long as the graph lives, whatever eager work (evaluation of a
  // smaller last batch, say) later makes ctx_ replace.
  graph_ctx_ = ctx_.WithOwnScratch();
  ExecutionContext& ctx = *graph_ctx_;
  // What the eager step does, in the same order and with the same kernels
  // (so --deterministic losses match it bit for bit), but with nothing that
  // waits for the host: the losses stay on the device until read after the
  // replay.
  cuda::BeginCapture(stream);
  const int64_t n = model_->loss_stats_size();
  for (int64_t micro = 0; micro < k; ++micro) {
    Tensor stats = graph_losses_.View(n * micro, {n});
    model_->ForwardLossToDevice(ctx, graph_batches_[micro], stats);
    if (reducer_) reducer_->PrepareForBackward(/*sync=*/micro == k - 1);
    model_->BackwardLoss(ctx, loss_scale / static_cast<double>(k * ranks_.world_size), /*accumulate=*/micro > 0);
  }
  if (reducer_) {
    const StatusOr<ReduceStats> waited = reducer_->Wait();
    if (!waited.ok()) {
      cuda::AbortCapture(stream);
      graph_ctx_.reset();
      cuda::ReleaseMemoryHeldForCapture(ctx_.device().index);
      return waited.status();
    }
  }
  graph_ = cuda::EndCapture(stream);
  return Status::Ok();
}

void Trainer::DestroyStepGraph() {
  if (graph_ == nullptr) return;
  cuda::DestroyGraph(graph_);
  graph_ = nullptr;
  graph_ctx_.reset();
  cuda::ReleaseMemoryHeldForCapture(ctx_.device().index);
}

namespace {

// "KIND:OFFSET:PARAM": a piece of a parameter's optimizer state.
std::string StateKey(const std::string& kind, int64_t offset, const std::string& param) {
  return kind + ":" + std::to_string(offset) + ":" + param;
}

}  // namespace

Status Trainer::ResumeModel() {
  if (!options_.resume) return Status::Ok();
  std::string note;
  StatusOr<CheckpointReader> reader = CheckpointReader::OpenLatest(options_.checkpoint_dir, &note);
  if (!note.empty() && is_root()) std::printf("ddp_train: --resume: %s\n", note.c_str());
  if (!reader.ok()) {
    if (reader.status().code() != StatusCode::kNotFound) {
      return Status(reader.status().code(), "--resume: " + reader.status().message());
    }
    if (is_root()) {
      std::printf("ddp_train: --resume: no checkpoint in %s yet; starting from step 0\n",
                  options_.checkpoint_dir.c_str());
    }
    return Status::Ok();
  }
  const CheckpointManifest& m = reader->manifest();
  const std::string where = "--resume: checkpoint " + reader->path();
  auto differs = [&](const std::string& what, const std::string& theirs, const std::string& ours) {
    return InvalidArgument(where + " was written with " + what + " " + theirs + ", this run has " + ours);
  };
  if (m.model() != options_.model) return differs("--model", m.model(), options_.model);
  // Another world size, split of the batch or ZeRO stage is fine (the
  // optimizer state is stored per parameter piece, and the data position
  // in samples): the global batch must stay, so each step takes the same
  // samples and the run follows the equivalence contract.
  const int64_t global = sampler_->global_batch();
  const int64_t written_global = m.world_size() * m.accumulation_steps() * m.batch_size();
  if (written_global != global) {
    return InvalidArgument(where + " was written at a global batch of " + std::to_string(written_global) + " (" +
                           std::to_string(m.world_size()) + " ranks x " + std::to_string(m.accumulation_steps()) +
                           " micro-batches x " + std::to_string(m.batch_size()) + "), this run's is " +
                           std::to_string(global) + " (" + std::to_string(ranks_.world_size) + " x " +
                           std::to_string(options_.accumulation_steps) + " x " + std::to_string(options_.batch_size) +
                           "); keep ranks x --accumulation-steps x --batch-size");
  }
  if (m.samples() != m.step() * global) {
    return InvalidArgument(where + ": its data position, " + std::to_string(m.samples()) + " samples, is not step " +
                           std::to_string(m.step()) + " x the global batch " + std::to_string(global));
  }
  if (m.optimizer() != options_.optimizer) return differs("--optimizer", m.optimizer(), options_.optimizer);
  if (m.step() >= total_steps_) {
    return InvalidArgument(where + " is at step " + std::to_string(m.step()) + ", and this run ends at step " +
                           std::to_string(total_steps_) + ": nothing is left to train");
  }
  StatusOr<SafetensorsContents> weights = reader->ReadFile("model.safetensors");
  if (!weights.ok()) return Status(weights.status().code(), "--resume: " + weights.status().message());
  std::vector<std::pair<std::string, Tensor>> named;
  for (NamedTensor& t : weights->tensors) named.emplace_back(t.name, t.tensor);
  const Status loaded = model_->LoadStateDict(named);
  if (!loaded.ok()) return InvalidArgument(where + ": model.safetensors: " + loaded.message());
  start_step_ = m.step();
  resume_from_ = std::move(*reader);
  return Status::Ok();
}

Status Trainer::ResumeOptimizer() {
  const CheckpointManifest& m = resume_from_->manifest();
  const int64_t zero_stage = zero_ ? options_.zero_stage : 0;
  // Written by the same layout: this rank's own file (its shard under
  // ZeRO; the whole state, which rank 0 wrote, otherwise). Resharded:
  // every optimizer file of the checkpoint, each slot assembled from the
  // pieces that cover it.
  std::vector<std::string> files;
  // (Checkpoints before bucket sizes were recorded hold 0: the same layout.)
  const bool same_buckets = m.bucket_mb() == 0.0 || (m.bucket_mb() == options_.bucket_mb &&
                                                       m.first_bucket_mb() == options_.first_bucket_mb);
  if (m.world_size() == ranks_.world_size && m.zero_stage() == zero_stage && (same_buckets || !zero_)) {
    files.push_back(zero_ ? OptimizerShardName(ranks_.rank) : "optimizer.safetensors");
  }
  StatusOr<OptimizerStatePieces> pieces = OptimizerStatePieces::Read(*resume_from_, files);
  if (!pieces.ok()) return Status(pieces.status().code(), "--resume: " + pieces.status().message());
  const std::vector<std::string> kinds = optimizer_->state_names();
  std::vector<Tensor> state = optimizer_->state();
  const size_t slots = slot_places_.size();
  CHECK_EQ(state.size(), kinds.size() * slots) << "optimizer state layout";
  for (size_t k = 0; k < kinds.size(); ++k) {
    for (size_t i = 0; i < slots; ++i) {
      const SlotPlace& place = slot_places_[i];
      StatusOr<Tensor> values = pieces->Assemble(kinds[k], place.name, place.offset, place.numel);
      if (!values.ok()) return Status(values.status().code(), "--resume: " + values.status().message());
      state[k * slots + i].CopyFrom(*values);
    }
  }
  optimizer_->set_steps(m.optimizer_steps());
  scaler_->Restore(m.loss_scale(), m.loss_scale_growth_tracker(), m.skipped_steps());
  prefetched_ = start_step_ * options_.accumulation_steps;
  if (is_root()) {
    std::printf("ddp_train: --resume: continuing from %s at step %lld\n", resume_from_->path().c_str(),
                static_cast<long long>(start_step_));
  }
  return Status::Ok();
}

Tensor Trainer::Stage(size_t index, const Tensor& t) {
  if (staging_.size() <= index) staging_.resize(index + 1);
  Tensor& buffer = staging_[index];
  if (!buffer.defined() || buffer.shape() != t.shape() || buffer.dtype() != t.dtype() || buffer.format() != t.format()) {
    buffer = Tensor::Empty(t.shape(), t.dtype(), Device::Cpu(), t.format());
  }
  buffer.CopyFrom(t);
  return buffer;
}

void Trainer::PrepareStaging() {
  // What TakeSnapshot copies, in its order; the copies now also fault the
  // pages in.
  size_t index = 0;
  if (is_root()) {
    for (const auto& [name, t] : model_->StateDict()) Stage(index++, t);
  }
  if (zero_ || is_root()) {
    for (const Tensor& t : optimizer_->state()) Stage(index++, t);
  }
}

StatusOr<CheckpointSnapshot> Trainer::TakeSnapshot(int64_t step) {
  CheckpointSnapshot snapshot;
  snapshot.step = step;
  // Under ZeRO every f32 master weight is made current everywhere (the
  // gathers of this step's update land first).
  if (zero_) {
    RETURN_IF_ERROR(zero_->FinishParameterGather());
    RETURN_IF_ERROR(zero_->GatherMasterWeights());
  }
  if (is_root()) {
    CheckpointManifest& m = snapshot.manifest;
    m.set_format_version(1);
    m.set_model(options_.model);
    std::vector<gflags::CommandLineFlagInfo> flags;
    gflags::GetAllFlags(&flags);
    for (const gflags::CommandLineFlagInfo& f : flags) {
      if (!f.is_default) (*m.mutable_flags())[f.name] = f.current_value;
    }
    m.set_step(step);
    m.set_samples(step * sampler_->global_batch());
    m.set_world_size(ranks_.world_size);
    m.set_batch_size(options_.batch_size);
    m.set_accumulation_steps(options_.accumulation_steps);
    m.set_zero_stage(zero_ ? options_.zero_stage : 0);
    m.set_bucket_mb(options_.bucket_mb);
    m.set_first_bucket_mb(options_.first_bucket_mb);
    m.set_optimizer(options_.optimizer);
    m.set_optimizer_steps(optimizer_->steps());
    m.set_seed(options_.seed);
    m.set_loss_scale(scaler_->scale());
    m.set_loss_scale_growth_tracker(scaler_->growth_tracker());
    m.set_skipped_steps(scaler_->skipped_steps());
  }
  // Copies into the staging buffers (the writer reads them; the next
  // snapshot waits for it).
  size_t index = 0;
  if (is_root()) {
    for (const auto& [name, t] : model_->StateDict()) snapshot.model.push_back({name, Stage(index++, t)});
  }
  if (zero_ || is_root()) {
    snapshot.optimizer_file = zero_ ? OptimizerShardName(ranks_.rank) : "optimizer.safetensors";
    const std::vector<std::string> kinds = optimizer_->state_names();
    const std::vector<Tensor> state = optimizer_->state();
    const size_t slots = slot_places_.size();
    for (size_t k = 0; k < kinds.size(); ++k) {
      for (size_t i = 0; i < slots; ++i) {
        const SlotPlace& place = slot_places_[i];
        snapshot.optimizer.push_back({StateKey(kinds[k], place.offset, place.name), Stage(index++, state[k * slots + i])});
      }
    }
    snapshot.optimizer_metadata = {{"optimizer", options_.optimizer},
                                   {"steps", std::to_string(optimizer_->steps())},
                                   {"rank", std::to_string(ranks_.rank)}};
  }
  return snapshot;
}

Status Trainer::FinishPendingCheckpoint() {
  const int64_t step = checkpointer_->pending_step();
  // Decided together: no rank commits, or goes on, alone.
  // Every rank's files written: asked in short all-reduces, so no rank sits
  // inside one (where the collective watchdog times it) while another
  // writes gigabytes.
  while (distributed()) {
    const bool done = checkpointer_->LocalDone();
    Tensor count = Tensor::FromVector<double>({done ? 1.0 : 0.0}, {1});
    const CollectiveLabel label("the poll of every rank's checkpoint files");
    RETURN_IF_ERROR(comm_->AllReduce(count, ReduceOp::kSum)->Wait());
    if (count.data<double>()[0] == static_cast<double>(ranks_.world_size)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  RETURN_IF_ERROR(AgreeOnStatus(comm_, checkpointer_->WaitLocal(),
                                "another rank failed to write the checkpoint of step " + std::to_string(step) +
                                    "; stopping"));
  return AgreeOnStatus(comm_, CommitPendingCheckpoint(),
                       "rank 0 failed to commit the checkpoint of step " + std::to_string(step) + "; stopping");
}

Status Trainer::CommitPendingCheckpoint() {
  if (!is_root()) {
    checkpointer_->Finish();
    return Status::Ok();
  }
  const int64_t step = checkpointer_->pending_step();
  RETURN_IF_ERROR(checkpointer_->Commit());
  progress_.EndLine();
  std::printf("checkpoint: step %lld written to %s/%s\n", static_cast<long long>(step),
              options_.checkpoint_dir.c_str(), CheckpointName(step).c_str());
  std::fflush(stdout);
  return Status::Ok();
}


std::string Trainer::FirstNonFiniteGradient() {
  if (zero_) {
    for (const OptimizerSlot& slot : zero_->OptimizerSlots([](const Parameter&) { return 0.0f; })) {
      if (slot.grad.numel() > 0 && !AllFinite(ctx_, slot.grad)) return slot.name;
    }
    return "?";
  }
  for (Parameter* p : model_->parameters()) {
    if (!AllFinite(ctx_, p->grad)) return p->name;
  }
  return "?";
}

std::vector<Tensor> Trainer::HeldGradients() {
  if (zero_) return zero_->GradientPieces();
  return {model_->flat_gradients()};
}

namespace {

// FNV-1a, continued over `n` bytes (tests' state digests).
constexpr uint64_t kFnvStart = 1469598103934665603ull;
uint64_t Fnv1a(uint64_t hash, const void* data, size_t n) {
  const unsigned char* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) hash = (hash ^ bytes[i]) * 1099511628211ull;
  return hash;
}
uint64_t Fnv1a(uint64_t hash, const Tensor& t) {
  const Tensor host = t.To(Device::Cpu());
  return Fnv1a(hash, host.raw_data(), host.nbytes());
}

}  // namespace

void Trainer::PrintStateDigest(int64_t step) {
  // Over bytes copied to the host.
  uint64_t hash = kFnvStart;
  auto add = [&](const void* data, size_t n) { hash = Fnv1a(hash, data, n); };
  auto add_tensor = [&](const Tensor& t) { hash = Fnv1a(hash, t); };
  // Under ZeRO only this rank's pieces of the master weights are current.
  if (zero_) {
    for (const OptimizerSlot& slot : zero_->OptimizerSlots([](const Parameter&) { return 0.0f; })) {
      add_tensor(slot.value);
    }
  } else {
    add_tensor(model_->flat_parameters());
  }
  for (const Tensor& t : optimizer_->state()) add_tensor(t);
  const int64_t steps = optimizer_->steps();
  add(&steps, sizeof(steps));
  const double scale = scaler_->scale();  // printed apart: a skipped step changes it alone
  std::printf("state digest: rank %d step %lld %016llx scale %g optimizer steps %lld\n", ranks_.rank,
              static_cast<long long>(step + 1), static_cast<unsigned long long>(hash), scale,
              static_cast<long long>(steps));
  std::fflush(stdout);
}

StatusOr<double> Trainer::Evaluate() {
  if (zero_) RETURN_IF_ERROR(zero_->FinishParameterGather());
  // Every rank evaluates rank 0's model: each rank's batch-norm running
  // statistics have seen only its own samples, so rank 0's go to all (as
  // DDP's broadcast_buffers does before a forward); --save-weights and
  // checkpoints hold rank 0's too.
  if (distributed() && !model_->buffers().empty()) {
    std::vector<Tensor> buffers;
    for (Buffer* b : model_->buffers()) buffers.push_back(b->value);
    const CollectiveLabel label("broadcast of batch-norm buffers before evaluation");
    RETURN_IF_ERROR(comm_->BroadcastCoalesced(std::move(buffers), 0)->Wait());
  }
  if (faults_.print_state_digest) {
    uint64_t buffers = kFnvStart;
    for (Buffer* b : model_->buffers()) buffers = Fnv1a(buffers, b->value);
    const uint64_t parameters = Fnv1a(kFnvStart, model_->flat_parameters());
    std::printf("eval digest: rank %d step %lld buffers %016llx parameters %016llx\n", ranks_.rank,
                static_cast<long long>(optimizer_->steps()), static_cast<unsigned long long>(buffers),
                static_cast<unsigned long long>(parameters));
    std::fflush(stdout);
  }
  model_->SetTraining(false);
  // Rank r evaluates samples r, r + world, ...; the counts are summed.
  const int64_t n = data_.eval->size(), b = options_.batch_size, world = ranks_.world_size;
  std::vector<int64_t> mine;
  for (int64_t i = ranks_.rank; i < n; i += world) mine.push_back(i);
  // The model's first count: top-1 of images, masked tokens (pretraining)
  // or sequences (classification).
  int64_t correct = 0, counted = 0;
  for (int64_t start = 0; start < static_cast<int64_t>(mine.size()); start += b) {
    const int64_t count = std::min<int64_t>(b, static_cast<int64_t>(mine.size()) - start);
    const std::vector<int64_t> indices(mine.begin() + start, mine.begin() + start + count);
    const EvalCount c = model_->ForwardLoss(ctx_, LoadBatch(*data_.eval, indices, ctx_.device())).counts.at(0);
    correct += c.correct;
    counted += c.counted;
    eval_label_ = c.label;
  }
  model_->SetTraining(true);
  if (distributed()) {
    Tensor count = Tensor::FromVector<int64_t>({correct, counted}, {2});
    RETURN_IF_ERROR(comm_->AllReduce(count, ReduceOp::kSum)->Wait());
    correct = count.data<int64_t>()[0];
    counted = count.data<int64_t>()[1];
  }
  return static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(counted, 1));
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
      std::min<int64_t>(options_.cuda_graphs ? kGraphWarmupSteps + 1 : 2, total_steps_ - start_step_ - 1);
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
      const int64_t committed_step = checkpointer_->pending_step();
      const Status committed = CommitPendingCheckpoint();
      if (committed.ok() && is_root()) record["checkpoint_committed"] = committed_step;
      if (!committed.ok() && local.ok()) local = committed;  // every rank learns of it at the next step
    }
    // Preempted: every rank stops after this step, with a checkpoint of it.
    // (A signal during the last step changes nothing: the run finishes.)
    const bool stop = r.stop && step + 1 < total_steps_;
    if (stop) result.preempted_at_step = step + 1;
    if (checkpointer_ && (stop || (options_.checkpoint_every > 0 && (step + 1) % options_.checkpoint_every == 0))) {
      const auto stall_start = std::chrono::steady_clock::now();
      if (checkpointer_->pending()) RETURN_IF_ERROR(FinishPendingCheckpoint());
      ASSIGN_OR_RETURN(CheckpointSnapshot snapshot, TakeSnapshot(step + 1));
      checkpointer_->Begin(std::move(snapshot));
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
  if (checkpointer_ && checkpointer_->pending()) RETURN_IF_ERROR(FinishPendingCheckpoint());
  ASSIGN_OR_RETURN(const RankTimes rank_times, GatherRankTimes(comm_, compute_times, wait_times));
  // The last update, before eval and saving; after 16-bit gathers the f32
  // master weights too, so every rank holds all of them.
  if (zero_) RETURN_IF_ERROR(zero_->GatherMasterWeights());
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
  summary.zero_stage = zero_ ? options_.zero_stage : 0;
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
  if (options_.cuda_graphs) summary.cuda_graph_captures = graph_captures_;
  if (zero_) summary.zero_gather_dtype = DTypeName(zero_->gather_dtype());
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
  m.grad_bytes = zero_ ? zero_->gradient_bytes() : static_cast<int64_t>(model_->flat_gradients().nbytes());
  m.optimizer_bytes = optimizer_->state_bytes();
  m.transient_bucket_bytes = zero_ ? zero_->transient_bytes() : 0;
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
