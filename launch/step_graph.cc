#include "launch/step_graph.h"

#include "launch/step_agreement.h"
#include "runtime/cuda/cuda_device.h"

namespace ddp {

StepGraph::StepGraph(StepGraphOptions options, ExecutionContext& ctx, Model* model, Reducer* reducer,
                     Communicator* comm)
    : options_(options), ctx_(ctx), model_(model), reducer_(reducer), comm_(comm) {}

StepGraph::~StepGraph() { Destroy(); }

StatusOr<std::unique_ptr<StepGraph>> StepGraph::Create(StepGraphOptions options, ExecutionContext& ctx, Model* model,
                                                       Reducer* reducer, Communicator* comm, const BatchSource& data,
                                                       int64_t batch_size, const std::string& model_name,
                                                       const std::string& device) {
  if (!cuda::GetMemoryStats(ctx.device().index).pooled) {
    return FailedPrecondition("--cuda-graphs needs CUDA's stream-ordered memory pool (cudaMallocAsync), which " +
                              device + " lacks or DDP_CUDA_ALLOCATOR=caching turned off");
  }
  if (model->loss_stats_size() == 0) {
    return Unimplemented("--cuda-graphs with --model " + model_name +
                         ": its loss is read on the host within the step; use eager steps");
  }
  if (const std::string blocker = model->CaptureBlocker(); !blocker.empty()) {
    return Unimplemented("--cuda-graphs with --model " + model_name + ": " + blocker);
  }
  std::unique_ptr<StepGraph> graph(new StepGraph(options, ctx, model, reducer, comm));
  for (int64_t micro = 0; micro < options.accumulation_steps; ++micro) {
    graph->inputs_.push_back(AllocateBatch(data, batch_size, ctx.device()));
  }
  graph->losses_ = Tensor::Empty({options.accumulation_steps, model->loss_stats_size()}, DType::kF64, ctx.device());
  return graph;
}

StatusOr<double> StepGraph::Replay(double loss_scale) {
  if (graph_ != nullptr && scale_ != loss_scale) Destroy();
  if (graph_ == nullptr) {
    cuda::TrimMemoryPools(ctx_.device().index);
    const Status captured = Capture(loss_scale);
    // A rank that failed to capture would leave its peers waiting inside
    // their graphs' collectives: decided together.
    const Status agreed = AgreeOnStatus(comm_, captured, "another rank failed to capture its CUDA graph; stopping");
    if (captured.ok() && !agreed.ok()) Destroy();
    RETURN_IF_ERROR(agreed);
    scale_ = loss_scale;
    ++captures_;
  }
  cuda::LaunchGraph(graph_, ctx_.cuda_stream());
  const int64_t k = options_.accumulation_steps, n = model_->loss_stats_size();
  double loss_sum = 0.0;
  for (int64_t micro = 0; micro < k; ++micro) {
    loss_sum += model_->ReadLoss(ctx_, losses_.View(n * micro, {n}), inputs_[micro]).loss;
  }
  return loss_sum / static_cast<double>(k);
}

Status StepGraph::Capture(double loss_scale) {
  const int64_t k = options_.accumulation_steps;
  void* stream = ctx_.cuda_stream();
  // The allocator turns allocations into the graph's own when the device's
  // current stream is being captured: it must be this one.
  CHECK(cuda::CurrentStream(ctx_.device().index) == stream) << "capturing on a stream that is not the current one";
  graph_ctx_ = ctx_.WithOwnScratch();
  ExecutionContext& ctx = *graph_ctx_;
  // What the eager step does, in the same order and with the same kernels
  // (so --deterministic losses match it bit for bit), but with nothing that
  // waits for the host.
  cuda::BeginCapture(stream);
  const int64_t n = model_->loss_stats_size();
  for (int64_t micro = 0; micro < k; ++micro) {
    Tensor stats = losses_.View(n * micro, {n});
    model_->ForwardLossToDevice(ctx, inputs_[micro], stats);
    if (reducer_) reducer_->PrepareForBackward(/*sync=*/micro == k - 1);
    model_->BackwardLoss(ctx, loss_scale / static_cast<double>(k * options_.world_size), /*accumulate=*/micro > 0);
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

void StepGraph::Destroy() {
  if (graph_ == nullptr) return;
  cuda::DestroyGraph(graph_);
  graph_ = nullptr;
  graph_ctx_.reset();
  cuda::ReleaseMemoryHeldForCapture(ctx_.device().index);
}

}  // namespace ddp
