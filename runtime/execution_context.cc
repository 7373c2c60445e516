#include "runtime/execution_context.h"

#include <omp.h>

#include <glog/logging.h>

namespace ddp {

ExecutionContext ExecutionContext::Cpu(int num_threads) {
  CHECK_GE(num_threads, 0);
  if (num_threads > 0) omp_set_num_threads(num_threads);
  return ExecutionContext(Device::Cpu(), num_threads > 0 ? num_threads : omp_get_max_threads(), nullptr);
}

ExecutionContext ExecutionContext::Meta(Device planned) {
  CHECK(!planned.is_meta()) << "a meta context plans for a CPU or a CUDA device";
  ExecutionContext ctx(Device::Meta(), 1, nullptr);
  ctx.planned_ = planned;
  return ctx;
}

ExecutionContext ExecutionContext::Cuda(int index, void* stream) {
  return ExecutionContext(Device::Cuda(index), 1, stream);
}

Tensor ExecutionContext::Scratch(int slot, int64_t bytes) {
  CHECK_GE(slot, 0);
  if (static_cast<int>(scratch_->size()) <= slot) scratch_->resize(slot + 1);
  Tensor& buffer = (*scratch_)[slot];
  if (!buffer.defined() || buffer.numel() < bytes) buffer = Tensor::Empty({bytes}, DType::kU8, device_);
  return buffer.View(0, {bytes});
}

int64_t ExecutionContext::scratch_bytes() const {
  int64_t bytes = 0;
  for (const Tensor& buffer : *scratch_) bytes += buffer.defined() ? static_cast<int64_t>(buffer.nbytes()) : 0;
  return bytes;
}

ExecutionContext ExecutionContext::WithOwnScratch() const {
  ExecutionContext copy = *this;
  copy.scratch_ = std::make_shared<std::vector<Tensor>>(*scratch_);
  return copy;
}

Tensor ExecutionContext::ScratchTensor(int slot, const Shape& shape, DType dtype) {
  const int64_t bytes = NumElements(shape) * static_cast<int64_t>(DTypeSize(dtype));
  return Scratch(slot, bytes).ReinterpretAs(dtype, shape);
}

}  // namespace ddp
