// torch.nn.Sequential: children run in order. Append names them "0", "1",
// ...; AppendNamed gives them names, as a model with named stages does.
#pragma once

#include <vector>

#include "runtime/layers/layer.h"

namespace ddp {

class Sequential : public Layer {
 public:
  template <typename L, typename... Args>
  L* Append(Args&&... args) {
    return AppendNamed<L>(std::to_string(layers_.size()), std::forward<Args>(args)...);
  }
  template <typename L, typename... Args>
  L* AppendNamed(const std::string& name, Args&&... args) {
    L* layer = AddChild<L>(name, std::forward<Args>(args)...);
    layers_.push_back(layer);
    return layer;
  }
  size_t size() const { return layers_.size(); }
  Layer* at(size_t i) { return layers_.at(i); }

 protected:
  Tensor ForwardImpl(ExecutionContext& ctx, const Tensor& x) override;
  Tensor BackwardImpl(ExecutionContext& ctx, const Tensor& dy) override;

 private:
  std::vector<Layer*> layers_;
};

}  // namespace ddp
