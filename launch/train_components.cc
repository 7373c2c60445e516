#include "launch/train_components.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "launch/bucket_autotune.h"
#include "launch/output_paths.h"
#include "launch/weights_file.h"
#include "models/registry.h"
#include "runtime/allocator.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/ops/conv2d.h"
#include "runtime/safetensors.h"

namespace ddp {
namespace {

// GPU clocks, temperature, power and throttling: sampled this often.
constexpr double kHealthIntervalSeconds = 5.0;

// Builds one run's parts. Its members carry the trainer's names for the
// options and the parts (references into TrainComponents), so each step of
// the building reads as it did inside the trainer.
class Builder {
 public:
  Builder(TrainOptions& options, Communicator* comm, const RankInfo& ranks, ExecutionContext& ctx,
          const FaultInjection& faults, ProgressPrinter* progress, TrainComponents& parts)
      : options_(options), comm_(comm), ranks_(ranks), ctx_(ctx), faults_(faults), progress_(progress),
        metrics_(parts.metrics), tensorboard_(parts.tensorboard), data_(parts.data), health_(parts.health),
        gpu_summary_(parts.gpu_summary), checkpoints_(parts.checkpoints), sampler_(parts.sampler),
        total_steps_(parts.total_steps), start_step_(parts.start_step), precision_(parts.precision),
        model_(parts.model), sync_(parts.sync), optimizer_(parts.optimizer),
        profiler_(parts.profiler), input_(parts.input), step_graph_(parts.step_graph) {}

  Status Setup();

 private:
  Status SetupTraining(int64_t dataset_size);
  Status PlanSteps(int64_t dataset_size);
  // What an out-of-memory line says from now on (runtime/allocator.h).
  void MemoryPhase(const std::string& context) const;
  Status BuildModel();
  Status BuildOptimizer();
  Status BuildInput();
  // --bucket-mb auto: sets options_.bucket_mb, the same on every rank.
  Status ChooseBucketSize();
  void StartGpuHealth();
  bool on_gpu() const { return ctx_.device().is_cuda(); }
  // A CUDA rank, or a meta one planning one: its precision and memory format.
  bool planned_gpu() const { return ctx_.planned_device().is_cuda(); }
  bool on_meta() const { return ctx_.device().is_meta(); }
  bool is_root() const { return ranks_.rank == 0; }
  bool distributed() const { return comm_ != nullptr; }
  // A CUDA rank (or a plan of one) whose f32 master weights ZeRO will keep
  // in shards (stage 3, or 16-bit gathers; not where --bucket-mb auto runs
  // the whole model first): the model stays on the host and the device
  // gets only this rank's pieces (Model::MoveParts). After Precision.
  bool MastersStayOnHost() const {
    return planned_gpu() && distributed() && options_.zero_stage > 0 && !options_.bucket_mb_auto &&
           ZeroReducer::ShardsMasters(options_.zero_stage, GatherDType());
  }
  // What ZeRO's parameter gather carries: the compute dtype, or f32
  // (--zero-gather-dtype fp32).
  DType GatherDType() const {
    return options_.zero_gather_low_precision ? precision_->compute_dtype() : DType::kF32;
  }
  const CheckpointReader* resumed() const { return checkpoints_ ? checkpoints_->resumed() : nullptr; }

  TrainOptions& options_;
  Communicator* comm_;
  const RankInfo& ranks_;
  ExecutionContext& ctx_;
  const FaultInjection& faults_;
  ProgressPrinter* progress_;
  MetricsWriter& metrics_;
  TensorBoardWriter& tensorboard_;
  TrainingData& data_;
  std::unique_ptr<HealthMonitor>& health_;
  nlohmann::ordered_json& gpu_summary_;
  std::unique_ptr<TrainCheckpoints>& checkpoints_;
  std::unique_ptr<GlobalBatchSampler>& sampler_;
  int64_t& total_steps_;
  int64_t& start_step_;
  std::unique_ptr<Precision>& precision_;
  std::unique_ptr<Model>& model_;
  std::unique_ptr<GradientSync>& sync_;
  std::unique_ptr<Optimizer>& optimizer_;
  std::unique_ptr<StepProfiler>& profiler_;
  std::unique_ptr<InputPipeline>& input_;
  std::unique_ptr<StepGraph>& step_graph_;
};

void Builder::StartGpuHealth() {
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

Status Builder::Setup() {
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
  MemoryPhase("opening the data (" + options_.data + (options_.eval_data.empty() ? "" : ", " + options_.eval_data) +
                  "); a tensors: file is read whole into host memory: give a smaller file, or data read as it is "
                  "needed (imagefolder:, tokens:)");
  ASSIGN_OR_RETURN(data_, OpenTrainingData(options_));
  if (is_root()) {
    for (const std::string& line : data_.warnings) std::printf("ddp_train: warning: %s\n", line.c_str());
    std::fflush(stdout);
  }
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
    ASSIGN_OR_RETURN(checkpoints_, TrainCheckpoints::Create(std::move(c), comm_, progress_));
  }
  return SetupTraining(data_.train->size());
}

Status Builder::SetupTraining(int64_t dataset_size) {
  RETURN_IF_ERROR(PlanSteps(dataset_size));
  MemoryPhase("building " + options_.model + " before its first step: the parameters, gradients and optimizer "
              "state alone do not fit; shard them with --zero-stage 2 over more ranks, or give the run more memory");
  RETURN_IF_ERROR(BuildModel());
  RETURN_IF_ERROR(BuildOptimizer());
  // From here on memory grows with the batch: its input and every step.
  MemoryPhase("training " + options_.model + " at --batch-size " + std::to_string(options_.batch_size) +
              "; try a smaller --batch-size");
  return BuildInput();
}

void Builder::MemoryPhase(const std::string& context) const {
  if (!on_meta()) SetOutOfMemoryContext(context);  // a plan names its own batch
}

// The sampler over `dataset_size` samples, the run's length in steps and the
// learning rate the global batch gives.
Status Builder::PlanSteps(int64_t dataset_size) {
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
  return Status::Ok();
}

// The precision, the model in it (resumed, or from --load-weights) on this
// rank's device.
Status Builder::BuildModel() {
  // A plan is for the CPU it names, not this one.
  if (ComputeDType(options_.precision) == DType::kBF16 && !on_gpu() && !on_meta() && !CpuHasFastBf16()) {
    FallBackFromCpuBf16(&options_, is_root());  // ddp_train has done this already, alike on every rank
  }
  PrecisionOptions precision;
  precision.precision = options_.precision;
  precision.memory_format = options_.memory_format;
  precision.loss_scale = options_.loss_scale;
  precision.gpu = planned_gpu();
  // Only where the batch has images (4-D tensors) to convert.
  for (const TensorSpec& spec : data_.train->Specs(1)) precision.images = precision.images || spec.shape.size() == 4;
  ASSIGN_OR_RETURN(precision_, Precision::Choose(precision));

  ModelOptions model_options;
  model_options.name = options_.model;
  model_options.num_classes = options_.num_classes;
  model_options.zero_init_residual = options_.zero_init_residual;
  model_options.seed = options_.seed;
  model_options.dropout = options_.dropout;
  model_options.task = options_.task;
  model_options.activation_checkpointing = options_.activation_checkpointing;
  model_options.label_smoothing = options_.label_smoothing;
  const bool masters_on_host = MastersStayOnHost();
  // A plan of a CUDA rank whose masters stay on the host builds the model
  // there, counted apart from the planned device.
  if (on_meta()) model_options.device = masters_on_host ? Device::MetaHost() : ctx_.device();
  ASSIGN_OR_RETURN(model_, CreateModel(model_options));
  if (checkpoints_) {
    ASSIGN_OR_RETURN(start_step_, checkpoints_->ResumeModel(*model_, sampler_->global_batch(), total_steps_));
  }
  if (resumed() && !options_.load_weights.empty() && is_root()) {
    std::printf("ddp_train: --load-weights %s: not read; the checkpoint holds the weights\n",
                options_.load_weights.c_str());
  }
  if (!options_.load_weights.empty() && !resumed()) {
    RETURN_IF_ERROR(LoadWeightsFile(options_.load_weights, *model_, options_.model, is_root()));
  }
  if (masters_on_host) {
    // ZeRO replaces the flat gradients with buckets of its own.
    model_->MoveTo(ctx_.device(), {/*parameters=*/false, /*gradients=*/false});
  } else if (on_gpu()) {
    model_->MoveTo(ctx_.device());
  }
  precision_->Apply(*model_, ctx_);
  return Status::Ok();
}

// Gradient sync (the bucket size chosen first under --bucket-mb auto), the
// optimizer over what it hands out, and the checkpoints' resume of both.
Status Builder::BuildOptimizer() {
  auto weight_decay = [&](const Parameter& p) {
    return options_.decay_bn_bias || !p.is_bias_or_norm ? static_cast<float>(options_.weight_decay) : 0.0f;
  };
  if (options_.bucket_mb_auto) RETURN_IF_ERROR(ChooseBucketSize());
  GradientSyncOptions sync;
  sync.zero_stage = options_.zero_stage;
  sync.zero_prefetch = options_.zero_prefetch;
  sync.bucket_mb = options_.bucket_mb;
  sync.first_bucket_mb = options_.first_bucket_mb;
  sync.overlap = options_.overlap;
  sync.wire_dtype = options_.wire_dtype;
  sync.gather_dtype = GatherDType();
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
    checkpoints_->Attach({model_.get(), optimizer_.get(), &precision_->scaler(), sync_->zero(), sync_->zero_stage(),
                          std::move(places), sampler_->global_batch(), options_.bucket_mb, options_.first_bucket_mb});
    RETURN_IF_ERROR(checkpoints_->ResumeOptimizer());
  }
  return Status::Ok();
}

// What the step reads and writes: the metrics file, the step profiler, the
// input pipeline and the CUDA graph.
Status Builder::BuildInput() {
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
Status Builder::ChooseBucketSize() {
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

}  // namespace

int DefaultThreads() {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return cores > 0 ? static_cast<int>(cores) : 1;
}

void FallBackFromCpuBf16(TrainOptions* options, bool announce) {
  if (announce) {
    std::printf("ddp_train: --precision bf16: this CPU lacks AVX-512 BF16 and AMX, where bf16 runs slower than f32; "
                "training in fp32\n");
  }
  options->precision = "fp32";
  if (options->grad_compression_auto) options->wire_dtype = DType::kF32;
}


ExecutionContext MakeContext(const TrainOptions& options, const RankInfo& ranks, void* cuda_stream) {
  if (options.device == "meta") {
    const bool cuda = options.plan_device == "cuda";
    ExecutionContext ctx = ExecutionContext::Meta(cuda ? Device::Cuda(0) : Device::Cpu());
    ctx.set_allow_tf32(cuda && options.precision == "tf32");
    ctx.set_deterministic(options.deterministic);
    // A CUDA rank's cuBLASLt workspace, held from its first GEMM on (every
    // model has one).
    if (cuda) ctx.Scratch(ExecutionContext::kLibraryWorkspaceSlot, ExecutionContext::kGemmWorkspaceBytes);
    return ctx;
  }
  if (options.gpu < 0) {
    return ExecutionContext::Cpu(options.threads > 0 ? options.threads
                                                     : std::max(1, DefaultThreads() / std::max(1, ranks.local_size)));
  }
  ExecutionContext ctx = ExecutionContext::Cuda(options.gpu, cuda_stream);
  ctx.set_allow_tf32(options.precision == "tf32");
  ctx.set_deterministic(options.deterministic);
  return ctx;
}

Status BuildComponents(TrainOptions& options, Communicator* comm, const RankInfo& ranks, ExecutionContext& ctx,
                       const FaultInjection& faults, ProgressPrinter* progress, TrainComponents* parts) {
  return Builder(options, comm, ranks, ctx, faults, progress, *parts).Setup();
}

}  // namespace ddp
