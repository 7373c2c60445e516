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
  if (options.print_digest) {
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
    const EvalCount c = model.ForwardLoss(ctx, LoadBatch(data, indices, ctx.device())).counts.at(0);
    correct += c.correct;
    counted += c.counted;
    result.label = c.label;
  }
  model.SetTraining(true);
  if (comm != nullptr) {
    Tensor sums = Tensor::FromVector<int64_t>({correct, counted}, {2});
    RETURN_IF_ERROR(comm->AllReduce(sums, ReduceOp::kSum)->Wait());
    correct = sums.data<int64_t>()[0];
    counted = sums.data<int64_t>()[1];
  }
  result.accuracy = static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(counted, 1));
  return result;
}

}  // namespace ddp
