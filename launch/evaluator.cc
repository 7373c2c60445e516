#include "launch/evaluator.h"

#include <algorithm>
#include <vector>

#include "comm/watchdog.h"
#include "launch/fault_injection.h"

namespace ddp {

StatusOr<Evaluation> Evaluate(ExecutionContext& ctx, Model& model, const BatchSource& data, Communicator* comm,
                              const EvaluatorOptions& options, int64_t optimizer_steps) {
  if (comm != nullptr && !model.buffers().empty()) {
    std::vector<Tensor> buffers;
    for (Buffer* b : model.buffers()) buffers.push_back(b->value);
    const CollectiveLabel label("broadcast of batch-norm buffers before evaluation");
    RETURN_IF_ERROR(comm->BroadcastCoalesced(std::move(buffers), 0)->Wait());
  }
  // (ZeRO-3 keeps the parameters whole only once gathered for the run's end.)
  if (options.print_digest && model.flat_parameters().defined()) {
    std::vector<Tensor> buffers;
    for (Buffer* b : model.buffers()) buffers.push_back(b->value);
    PrintEvalDigest(options.rank, optimizer_steps, buffers, model.flat_parameters());
  }
  model.SetTraining(false);
  const int64_t n = data.size(), b = options.batch_size;
  std::vector<int64_t> mine;
  for (int64_t i = options.rank; i < n; i += options.world_size) mine.push_back(i);
  int64_t correct = 0, counted = 0;
  Evaluation result;
  result.label = "accuracy";
  for (int64_t start = 0; start < static_cast<int64_t>(mine.size()); start += b) {
    const int64_t count = std::min<int64_t>(b, static_cast<int64_t>(mine.size()) - start);
    const std::vector<int64_t> indices(mine.begin() + start, mine.begin() + start + count);
    const LossResult r = model.ForwardLoss(ctx, LoadBatch(data, indices, ctx.device()));
    const EvalCount& c = r.counts.at(0);
    if (r.sample_outputs.defined()) {
      const int64_t width = r.sample_outputs.dim(1);
      if (!result.sample_outputs.defined()) result.sample_outputs = Tensor::Zeros({n, width}, DType::kF64);
      for (int64_t i = 0; i < count; ++i) {
        std::copy_n(r.sample_outputs.data<double>() + i * width, width,
                    result.sample_outputs.data<double>() + indices[i] * width);
      }
    }
    correct += c.correct;
    counted += c.counted;
    result.label = c.label;
  }
  model.SetTraining(true);
  if (comm != nullptr) {
    // With the counts: the width of each rank's table, and whether it has
    // one (a rank with no samples has none, yet takes part in the sum).
    const int64_t width = result.sample_outputs.defined() ? result.sample_outputs.dim(1) : 0;
    Tensor sums = Tensor::FromVector<int64_t>({correct, counted, width, width > 0 ? 1 : 0}, {4});
    RETURN_IF_ERROR(comm->AllReduce(sums, ReduceOp::kSum)->Wait());
    correct = sums.data<int64_t>()[0];
    counted = sums.data<int64_t>()[1];
    if (const int64_t tables = sums.data<int64_t>()[3]; tables > 0) {
      // Each rank filled its own rows and left the others 0: the sum is the
      // whole table.
      if (width == 0) result.sample_outputs = Tensor::Zeros({n, sums.data<int64_t>()[2] / tables}, DType::kF64);
      RETURN_IF_ERROR(comm->AllReduce(result.sample_outputs, ReduceOp::kSum)->Wait());
    }
  }
  result.accuracy = static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(counted, 1));
  return result;
}

}  // namespace ddp
