// ddp_train: data-parallel training of ResNet (and, later, BERT). See
// DESIGN.md for the command-line contract.
#include <cstdio>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "launch/train_options.h"
#include "launch/trainer.h"

namespace {

// One clear line, then a non-zero exit.
int Fail(const ddp::Status& status) {
  std::fprintf(stderr, "ddp_train: error: %s\n", status.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("ddp_train --model resnet50 [--batch-size 8 --steps 100 ...]");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  if (argc > 1) return Fail(ddp::InvalidArgument(std::string("unexpected argument '") + argv[1] + "'"));
  if (ddp::Status s = ddp::ApplyConfigFile(); !s.ok()) return Fail(s);
  ddp::StatusOr<ddp::TrainOptions> options = ddp::ReadTrainOptions();
  if (!options.ok()) return Fail(options.status());
  ddp::StatusOr<std::unique_ptr<ddp::Trainer>> trainer = ddp::Trainer::Create(*options);
  if (!trainer.ok()) return Fail(trainer.status());
  ddp::StatusOr<ddp::TrainResult> result = (*trainer)->Run();
  if (!result.ok()) return Fail(result.status());
  return 0;
}
