#include "launch/memory_planner.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include "comm/meta_communicator.h"
#include "comm/mpi_communicator.h"
#include "launch/output_paths.h"
#include "launch/trainer.h"
#include "runtime/data/batch_source.h"
#include "runtime/byte_size.h"
#include "runtime/clock.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/durable_files.h"
#include "runtime/tensor.h"

namespace ddp {
namespace {

// Steps a plan runs at each batch: the first allocates what is kept from
// then on (optimizer state, workspaces), the second is a steady one.
constexpr int64_t kPlanSteps = 2;
// The search's ceiling, past any batch a device of today holds.
constexpr int64_t kMostBatch = int64_t{1} << 22;

// The rows in the table's order: the text's name, the record's key, the
// bytes, whether the text shows it when 0, and the text's note.
struct Row {
  const char* name;
  const char* key;
  int64_t bytes;
  bool always = false;
  std::string note;
};

// The collectives' row's note: ZeRO's gradient bucket pool (stages 2 and
// 3), and what they hold only for a while, which the peak counts in this
// row or among the activations, as held when: stage 3's gathered parameter
// buckets at most, and the most split parameters' whole gradients at once.
std::string CollectivesNote(const MemoryBreakdown& b) {
  std::string note;
  auto add = [&note](const std::string& part) { note += (note.empty() ? "" : "; ") + part; };
  if (b.zero_bucket_pool > 0) add("gradient bucket pool " + FormatBytes(b.zero_bucket_pool));
  if (b.zero_gathered_peak > 0) add("gathered parameters up to " + FormatBytes(b.zero_gathered_peak));
  if (b.zero_split_gradient_peak > 0) add("split parameters' gradients up to " + FormatBytes(b.zero_split_gradient_peak));
  return note;
}

std::vector<Row> Rows(const MemoryPlan& plan) {
  const MemoryBreakdown& b = plan.at;
  // ZeRO keeps the f32 masters in shards at stage 3, and under mixed
  // precision at every stage; the working copy then also holds, in f32,
  // the parameters the forward reads so (norms, biases, embedding tables).
  const bool sharded = b.parameters < b.parameter_count * 4;
  const bool f32_reads = b.low_precision > b.parameter_count * 2;
  return {{sharded ? "parameters (f32 master shard)" : "parameters (f32 master weights)", "parameters",
           b.parameters},
          {f32_reads ? "working copy (16-bit, f32 reads)" : "16-bit weight copy", "low_precision_copy",
           b.low_precision},
          {"gradients", "gradients", b.gradients, true},
          {"optimizer state", "optimizer_state", b.optimizer},
          {"persistent buffers (batch norm)", "buffers", b.buffers},
          {"collectives' buffers and shards", "collectives", b.communication, false, CollectivesNote(b)},
          {"input batches", "input", b.input},
          {"workspace (scratch, libraries)", "workspace", b.workspace},
          {"data in host memory", "host_data", b.host_data},
          {"activations at the peak", "activations", b.activations, true,
           FormatBytes(static_cast<int64_t>(plan.per_sample)) + " a sample"}};
}

// The probe of `batch` in the search, or null.
const BatchProbe* ProbeOf(const MemoryPlan& plan, int64_t batch) {
  for (const BatchProbe& p : plan.probes) {
    if (p.batch == batch) return &p;
  }
  return nullptr;
}

std::string Describe(const TrainOptions& o, int world_size) {
  std::string what = o.model;
  if (o.model.rfind("bert", 0) == 0) {
    what += " (" + o.task + ", seq " + std::to_string(o.seq_len) + ")";
  } else {
    what += " (" + std::to_string(o.image_size) + "x" + std::to_string(o.image_size) + ")";
  }
  what += ", " + o.precision + (o.activation_checkpointing ? " with activation checkpointing" : "") + ", " +
          o.optimizer + ", " + std::to_string(world_size) + (world_size == 1 ? " rank" : " ranks");
  if (o.zero_stage > 0 && world_size > 1) what += " under ZeRO-" + std::to_string(o.zero_stage);
  if (o.accumulation_steps > 1) what += ", " + std::to_string(o.accumulation_steps) + " micro-batches a step";
  return what + ", on " + o.plan_device;
}

// What the device holds outside tensors. A CUDA rank: its context (with
// the runtime's own kernels), measured where a GPU is visible, and the
// libraries' kernels and handles and NCCL's buffers, which appear as they
// are first used (kLibraryBytes). A CPU rank: the process's code, MPI's
// and the libraries' memory.
constexpr int64_t kCudaDefaultOverhead = int64_t{1} << 30;
constexpr int64_t kLibraryBytes = int64_t{512} << 20;
constexpr int64_t kCpuDefaultOverhead = int64_t{512} << 20;

std::pair<int64_t, std::string> Overhead(const TrainOptions& o) {
  if (o.plan_overhead >= 0) return {o.plan_overhead, "--plan-overhead"};
  if (o.plan_device == "cpu") return {kCpuDefaultOverhead, "the CPU default: code, MPI and libraries"};
  std::string why = "the CUDA default: context, library kernels and NCCL's buffers";
  if (o.plan_memory > 0 && cuda::BuiltWithCuda() && cuda::DeviceCount() > 0) {
    std::string error;
    const int64_t context = cuda::DeviceBytesInUse(0, &error);
    if (context >= 0) {
      return {context + kLibraryBytes, "GPU 0 in use with this process's context, measured: " +
                                           FormatBytes(context) + ", and 512 MiB for library kernels and NCCL"};
    }
    why += " (GPU 0 not measured: " + error + ")";
  }
  return {kCudaDefaultOverhead, why};
}

// Bytes to the hundredth of a GiB, where a fit is decided.
std::string Precise(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return text;
}

// Whether `bytes` of tensors and the overhead fit the budget.
bool Fits(const MemoryPlan& plan, int64_t bytes) {
  return bytes + plan.request.overhead <= plan.request.options.plan_memory;
}

}  // namespace

StatusOr<MemoryBreakdown> MeasureBreakdown(const TrainOptions& options, int world_size, int64_t batch) {
  TrainOptions o = options;
  o.batch_size = batch;
  o.steps = kPlanSteps;
  o.epochs = 0;
  o.metrics_file.clear();  // the plan writes its own record
  SetActivationBatchSize(batch);
  SetOutOfMemoryContext("planning " + o.model + " at --batch-size " + std::to_string(batch) +
                        "; try a smaller --batch-size");
  MetaAllocator* meta = GetMetaAllocator();
  Allocator* host = GetCpuAllocator();
  const int64_t base = meta->bytes_in_use(), host_base = host->bytes_in_use();
  meta->ResetPeakSite();
  std::unique_ptr<MetaCommunicator> comm;
  if (world_size > 1) {
    // CPU ranks reduce over MPI, whose receive buffers come from the
    // allocator; NCCL's are its own (the overhead).
    MetaCommunicator::ScratchBytes scratch;
    if (o.plan_device == "cpu") {
      scratch = [world_size](const char* op, const Tensor& input, const Tensor& output) {
        return MpiScratchBytes(op, input, output, 0, world_size);
      };
    }
    comm = std::make_unique<MetaCommunicator>(0, world_size, std::move(scratch));
  }
  RankInfo ranks;
  ranks.world_size = world_size;
  MetaRunFigures run;
  int64_t host_data = 0, dataset_size = 0, comm_scratch_at_start = 0;
  {
    ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::Create(o, comm.get(), ranks));
    host_data = host->bytes_in_use() - host_base;
    dataset_size = trainer->dataset_size();
    if (comm) comm_scratch_at_start = comm->scratch_bytes();
    ASSIGN_OR_RETURN(run, trainer->RunMeta());
  }
  // MPI's receive buffer, kept once the steps' first collective grew it.
  const int64_t comm_grown = (comm ? comm->scratch_bytes() : 0) - comm_scratch_at_start;
  const MemoryFigures& m = run.memory;
  MemoryBreakdown b;
  b.batch_size = batch;
  b.parameters = m.param_bytes;
  b.low_precision = m.low_precision_bytes;
  b.gradients = m.grad_bytes;
  b.optimizer = m.optimizer_bytes;
  b.buffers = m.buffer_bytes;
  b.input = run.input_bytes;
  b.workspace = m.workspace_bytes;
  // A CPU rank holds its data's tensors in the memory it trains in; a GPU
  // rank's stay on the host.
  if (o.plan_device == "cpu") b.host_data = host_data;
  const int64_t persistent = run.persistent - base;
  b.communication = persistent - b.parameters - b.low_precision - b.gradients - b.optimizer - b.buffers - b.input -
                    run.workspace_at_start + comm_grown;
  b.peak = m.peak_bytes - base + b.host_data;
  b.step_peak = persistent + m.activation_peak_bytes + b.host_data;
  b.setup_peak = m.setup_peak_bytes - base;
  // What grew in the steps and stays (workspaces, the receive buffer) is
  // counted in its own row, as held at the peak.
  b.activations = m.activation_peak_bytes - (b.workspace - run.workspace_at_start) - comm_grown;
  b.zero_bucket_pool = m.transient_bucket_bytes;
  b.zero_gathered_peak = m.gathered_parameter_peak_bytes;
  b.zero_split_gradient_peak = m.split_gradient_peak_bytes;
  b.parameter_count = run.parameter_count;
  b.dataset_size = dataset_size;
  b.site = meta->peak_site();
  return b;
}

namespace {

// Activations past the bound counted, not fatal, while a plan runs.
class CountedActivationBound {
 public:
  CountedActivationBound() { SetActivationBoundCounted(true); }
  ~CountedActivationBound() { SetActivationBoundCounted(false); }
};

}  // namespace

StatusOr<MemoryPlan> PlanMemory(const MemoryPlanRequest& request) {
  const double start = SteadySeconds();
  const CountedActivationBound counted;
  MemoryPlan plan;
  plan.request = request;
  const TrainOptions& o = request.options;
  std::map<int64_t, MemoryBreakdown> measured;  // each batch once
  auto measure = [&](int64_t batch) -> StatusOr<MemoryBreakdown> {
    auto it = measured.find(batch);
    if (it != measured.end()) return it->second;
    ResetActivationsPastBound();
    ASSIGN_OR_RETURN(MemoryBreakdown b, MeasureBreakdown(o, request.world_size, batch));
    b.past_activation_bound = ActivationsPastBound() > 0;
    ++plan.meta_steps;
    measured[batch] = b;
    return b;
  };
  // The smallest batch: 1, or 2 where batch norm refuses a batch that
  // leaves one value a channel (small images).
  StatusOr<MemoryBreakdown> first = measure(plan.smallest_batch);
  if (!first.ok() && first.status().code() == StatusCode::kInvalidArgument) {
    StatusOr<MemoryBreakdown> second = measure(2);
    if (!second.ok()) return first.status();
    first = std::move(second);
    plan.smallest_batch = 2;
  }
  ASSIGN_OR_RETURN(const MemoryBreakdown smallest, std::move(first));
  plan.smallest_peak = smallest.peak;
  // A file's samples allow global batches of at most all of them.
  int64_t limit = kMostBatch;
  if (smallest.dataset_size != BatchSource::kEndless) {
    plan.data_limit = std::max(plan.smallest_batch, smallest.dataset_size / (request.world_size * o.accumulation_steps));
    limit = std::min(limit, plan.data_limit);
  }
  Status failed;
  auto peak_at = [&](int64_t batch) -> int64_t {
    StatusOr<MemoryBreakdown> b = measure(batch);
    if (!b.ok() && failed.ok()) failed = b.status();
    if (b.ok() && b->past_activation_bound && (plan.bound_batch == 0 || batch < plan.bound_batch)) {
      plan.bound_batch = batch;
    }
    return b.ok() && !b->past_activation_bound ? b->peak : std::numeric_limits<int64_t>::max() / 2;
  };
  if (o.plan_memory > 0) {
    const BatchSearch search =
        LargestFittingBatch(peak_at, o.plan_memory, request.overhead, limit, plan.smallest_batch);
    RETURN_IF_ERROR(failed);
    plan.largest_batch = search.largest_batch;
    plan.probes = search.probes;
    for (BatchProbe& p : plan.probes) p.past_bound = plan.bound_batch > 0 && p.batch >= plan.bound_batch;
  }
  const bool given = o.batch_size_given || o.plan_memory == 0;
  const int64_t at = given ? o.batch_size : std::max(plan.smallest_batch, plan.largest_batch);
  ASSIGN_OR_RETURN(plan.at, measure(at));
  if (plan.at.past_activation_bound) {
    return InvalidArgument("--batch-size " + std::to_string(at) + " puts an activation of " + o.model +
                           " past the 2^31 - 1 elements that cuDNN and this runtime's kernels take; plan without "
                           "--batch-size for the largest that fits");
  }
  // The growth per sample, from the farthest batch measured within the bound.
  int64_t other = 0;
  for (const auto& [batch, b] : measured) {
    if (batch != at && !b.past_activation_bound && (other == 0 || std::abs(batch - at) > std::abs(other - at))) {
      other = batch;
    }
  }
  if (other == 0) other = at + 1;
  ASSIGN_OR_RETURN(const MemoryBreakdown there, measure(other));
  plan.per_sample = static_cast<double>(plan.at.step_peak - there.step_peak) / static_cast<double>(at - other);
  plan.seconds = SteadySeconds() - start;
  return plan;
}

Status CheckSomeBatchFits(const MemoryPlan& plan) {
  if (plan.largest_batch != 0) return Status::Ok();
  const MemoryBreakdown& b = plan.at;
  const int64_t state = b.parameters + b.low_precision + b.gradients + b.optimizer + b.buffers + b.communication;
  return FailedPrecondition(
      "--plan-memory " + FormatBytes(plan.request.options.plan_memory) + ": no batch fits; the model's state alone " +
      "(parameters, gradients, optimizer state" + (b.low_precision > 0 ? ", the 16-bit copy" : "") + ") takes " +
      FormatBytes(state) + ", the smallest batch (" + std::to_string(plan.smallest_batch) + ") peaks at " +
      FormatBytes(plan.smallest_peak) + ", and the overhead (" + plan.request.overhead_source + ") adds " +
      FormatBytes(plan.request.overhead) + "; shard it with --zero-stage 2 over more ranks, or plan a larger device");
}

Status RunMemoryPlan(const TrainOptions& options, int job_world_size) {
  // Before anything is written: no output on an input.
  RETURN_IF_ERROR(CheckOutputPaths(InputPaths(options), OutputPaths(options)));
  MemoryPlanRequest request;
  request.options = options;
  request.world_size = options.plan_world_size > 0 ? options.plan_world_size : job_world_size;
  std::tie(request.overhead, request.overhead_source) = Overhead(options);
  ASSIGN_OR_RETURN(const MemoryPlan plan, PlanMemory(request));
  RETURN_IF_ERROR(CheckSomeBatchFits(plan));
  std::fputs(PlanText(plan).c_str(), stdout);
  std::fflush(stdout);
  if (options.metrics_file.empty()) return Status::Ok();
  const Status written = ReplaceFileAtomically(options.metrics_file, PlanJson(plan).dump() + "\n");
  return written.ok() ? written : Status(written.code(), "--metrics-file " + written.message());
}

std::string PlanText(const MemoryPlan& plan) {
  const MemoryBreakdown& b = plan.at;
  const TrainOptions& o = plan.request.options;
  std::string out = "ddp_train: memory plan, one rank of " + Describe(o, plan.request.world_size) + ", at --batch-size " +
                    std::to_string(b.batch_size) + ":\n";
  char line[200];
  for (const Row& row : Rows(plan)) {
    if (row.bytes == 0 && !row.always) continue;
    std::snprintf(line, sizeof(line), "  %-34s %12s", row.name, FormatBytes(row.bytes).c_str());
    out += line + (row.note.empty() ? std::string() : "  (" + row.note + ")") + "\n";
  }
  std::snprintf(line, sizeof(line), "  %-34s %12s\n", "tensors at the peak", FormatBytes(b.peak).c_str());
  out += line;
  std::snprintf(line, sizeof(line), "  %-34s %12s  (%s)\n", "overhead outside tensors",
                FormatBytes(plan.request.overhead).c_str(), plan.request.overhead_source.c_str());
  out += line;
  std::snprintf(line, sizeof(line), "  %-34s %12s\n", "total", FormatBytes(b.peak + plan.request.overhead).c_str());
  out += line;
  const std::string site = (b.site.layer.empty() ? std::string("outside the layers (optimizer, buckets, input)")
                                                  : b.site.layer + " " + b.site.pass) +
                           ", allocating " + FormatBytes(b.site.bytes);
  if (b.peak > b.step_peak) {
    out += std::string("  the peak: at start-up") +
           (o.zero_stage > 0 ? ", before ZeRO shards the model" : "") + "; the steps' own peak, " +
           FormatBytes(b.step_peak) + ", is at " + site + "\n";
  } else {
    out += "  the peak: " + site + "\n";
  }
  if (o.plan_memory > 0) {
    const int64_t need = b.peak + plan.request.overhead;
    if (o.batch_size_given) {
      out += "  --batch-size " + std::to_string(b.batch_size) + (Fits(plan, b.peak) ? " fits " : " does not fit ") +
             FormatBytes(o.plan_memory) + ": it needs " + Precise(need) + ", " +
             Precise(std::abs(o.plan_memory - need)) + (Fits(plan, b.peak) ? " to spare" : " too much") + "\n";
    }
    if (plan.largest_batch > 0) {
      out += "  the largest --batch-size that fits " + FormatBytes(o.plan_memory) + " is " +
             std::to_string(plan.largest_batch);
      if (const BatchProbe* p = ProbeOf(plan, plan.largest_batch)) {
        out += " (" + Precise(p->peak_bytes + plan.request.overhead) + ")";
      }
      if (const BatchProbe* p = ProbeOf(plan, plan.largest_batch + 1); p != nullptr && !p->past_bound) {
        out += "; " + std::to_string(p->batch) + " needs " + Precise(p->peak_bytes + plan.request.overhead);
      }
      if (plan.bound_batch == plan.largest_batch + 1) {
        out += "; at " + std::to_string(plan.bound_batch) +
               " an activation would pass the 2^31 - 1 elements a step may hold, whatever the memory";
      } else if (plan.largest_batch == plan.data_limit) {
        out += "; the data's " + std::to_string(b.dataset_size) + " samples hold no larger global batch";
      }
      out += "\n";
    }
  }
  std::snprintf(line, sizeof(line), "  planned in %.2f s (%d meta runs of %lld steps)\n", plan.seconds,
                plan.meta_steps, static_cast<long long>(kPlanSteps));
  return out + line;
}

nlohmann::ordered_json PlanJson(const MemoryPlan& plan) {
  const MemoryBreakdown& b = plan.at;
  const TrainOptions& o = plan.request.options;
  nlohmann::ordered_json rows = nlohmann::ordered_json::object();
  for (const Row& row : Rows(plan)) rows[row.key] = row.bytes;
  rows["zero_bucket_pool"] = b.zero_bucket_pool;
  rows["zero_gathered_peak"] = b.zero_gathered_peak;
  rows["zero_split_gradient_peak"] = b.zero_split_gradient_peak;
  nlohmann::ordered_json probes = nlohmann::ordered_json::array();
  for (const BatchProbe& p : plan.probes) {
    nlohmann::ordered_json peak = p.peak_bytes;  // null: past the activation bound, not measured
    if (p.past_bound) peak = nullptr;
    probes.push_back({{"batch", p.batch}, {"peak_bytes", peak}, {"fits", p.fits}});
  }
  nlohmann::ordered_json j = {{"model", o.model},
                              {"task", o.task},
                              {"precision", o.precision},
                              {"plan_device", o.plan_device},
                              {"world_size", plan.request.world_size},
                              {"zero_stage", o.zero_stage},
                              {"activation_checkpointing", o.activation_checkpointing},
                              {"optimizer", o.optimizer},
                              {"budget_bytes", o.plan_memory},
                              {"overhead_bytes", plan.request.overhead},
                              {"overhead_source", plan.request.overhead_source},
                              {"parameter_count", b.parameter_count},
                              {"batch_size", b.batch_size},
                              {"largest_batch", plan.largest_batch >= 0 ? nlohmann::ordered_json(plan.largest_batch)
                                                                        : nlohmann::ordered_json()},
                              {"smallest_batch", plan.smallest_batch},
                              {"activation_bound_batch", plan.bound_batch},
                              {"rows_bytes", rows},
                              {"activation_per_sample_bytes", plan.per_sample},
                              {"peak_bytes", b.peak},
                              {"step_peak_bytes", b.step_peak},
                              {"setup_peak_bytes", b.setup_peak},
                              {"total_bytes", b.peak + plan.request.overhead},
                              {"peak_site", {{"layer", b.site.layer}, {"pass", b.site.pass}, {"bytes", b.site.bytes}}},
                              {"probes", probes},
                              {"seconds", plan.seconds}};
  if (o.plan_memory > 0 && o.batch_size_given) j["fits"] = Fits(plan, b.peak);
  return {{"plan", j}};
}

}  // namespace ddp
