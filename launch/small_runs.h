// For tests: the small ResNet-18 run most tests start from and change what
// they check (32x32 synthetic images of 10 classes, batch 8, 4 SGD steps at
// lr 0.02 with momentum 0.9, zero-initialized residual BNs, 2 threads).
#pragma once

#include "launch/train_options.h"

namespace ddp {

inline TrainOptions SmallResNet18Run() {
  TrainOptions o;
  o.model = "resnet18";
  o.image_size = 32;
  o.num_classes = 10;
  o.batch_size = 8;
  o.steps = 4;
  o.data = "synthetic";
  o.threads = 2;
  o.optimizer = "sgd";
  o.lr = o.schedule.base_lr = 0.02;
  o.momentum = 0.9;
  o.zero_init_residual = true;
  o.precision = "fp32";
  return o;
}

}  // namespace ddp
