// Compares two safetensors weight files tensor by tensor and prints the
// worst normwise relative difference, max|a - b| / max|a|. Exit status 1 if
// it exceeds --rtol or the files hold different tensors.
//   compare_weights A.safetensors B.safetensors --rtol 1e-5 --exclude running_,num_batches_tracked
#include <cmath>
#include <cstdio>
#include <sstream>

#include <gflags/gflags.h>

#include "runtime/safetensors.h"

DEFINE_double(rtol, 1e-5, "largest normwise relative difference accepted");
DEFINE_string(exclude, "", "comma-separated name fragments of tensors to skip (e.g. running_)");

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (argc != 3) {
    std::fprintf(stderr, "usage: compare_weights A.safetensors B.safetensors [--rtol R] [--exclude a,b]\n");
    return 2;
  }
  std::vector<std::string> excluded;
  std::stringstream list(FLAGS_exclude);
  for (std::string item; std::getline(list, item, ',');) {
    if (!item.empty()) excluded.push_back(item);
  }
  ddp::StatusOr<ddp::SafetensorsContents> a = ddp::ReadSafetensors(argv[1]), b = ddp::ReadSafetensors(argv[2]);
  for (auto* r : {&a, &b}) {
    if (!r->ok()) {
      std::fprintf(stderr, "compare_weights: %s\n", r->status().message().c_str());
      return 1;
    }
  }
  double worst = 0.0;
  std::string worst_name;
  int compared = 0;
  for (const ddp::NamedTensor& t : a->tensors) {
    bool skip = false;
    for (const std::string& e : excluded) skip = skip || t.name.find(e) != std::string::npos;
    if (skip) continue;
    const ddp::Tensor* other = b->Find(t.name);
    if (other == nullptr || other->shape() != t.tensor.shape() || other->dtype() != t.tensor.dtype()) {
      std::fprintf(stderr, "compare_weights: tensor '%s' is missing or different in %s\n", t.name.c_str(), argv[2]);
      return 1;
    }
    double max_abs = 0.0, max_diff = 0.0;
    for (int64_t i = 0; i < t.tensor.numel(); ++i) {
      const double x = t.tensor.GetAsDouble(i), y = other->GetAsDouble(i);
      max_abs = std::max(max_abs, std::fabs(x));
      max_diff = std::max(max_diff, std::fabs(x - y));
    }
    const double rel = max_diff == 0.0 ? 0.0 : max_diff / std::max(max_abs, 1e-30);
    if (rel > worst) {
      worst = rel;
      worst_name = t.name;
    }
    ++compared;
  }
  std::printf("compared %d tensors: worst relative difference %.3g%s%s\n", compared, worst,
              worst_name.empty() ? "" : " in ", worst_name.c_str());
  return worst <= FLAGS_rtol && compared > 0 ? 0 : 1;
}
