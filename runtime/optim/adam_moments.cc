#include "runtime/optim/adam_moments.h"

namespace ddp {

AdamMoments::AdamMoments(std::vector<Tensor> first, std::vector<Tensor> second, float beta1, float beta2, float eps)
    : first_(std::move(first)), second_(std::move(second)), beta1_(beta1), beta2_(beta2), eps_(eps) {}

AdamBiasCorrections AdamMoments::NextStep() {
  ++steps_;
  AdamBiasCorrections c;
  c.bias1 = 1.0 - std::pow(static_cast<double>(beta1_), static_cast<double>(steps_));
  const double bias2 = 1.0 - std::pow(static_cast<double>(beta2_), static_cast<double>(steps_));
  c.inv_sqrt_bias2 = static_cast<float>(1.0 / std::sqrt(bias2));
  return c;
}

std::vector<Tensor> AdamMoments::state() const {
  std::vector<Tensor> state = first_;
  state.insert(state.end(), second_.begin(), second_.end());
  return state;
}

int64_t AdamMoments::state_bytes() const {
  int64_t bytes = 0;
  for (const std::vector<Tensor>* moments : {&first_, &second_}) {
    for (const Tensor& t : *moments) bytes += static_cast<int64_t>(t.nbytes());
  }
  return bytes;
}

}  // namespace ddp
