#include "launch/weights_file.h"

#include <cstdio>
#include <utility>
#include <vector>

#include "runtime/ops/reduce.h"
#include "runtime/safetensors.h"

namespace ddp {
namespace {

std::string List(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

Status LoadWeightsFile(const std::string& path, Model& model, const std::string& model_name, bool announce) {
  StatusOr<SafetensorsContents> weights = ReadSafetensors(path);
  if (!weights.ok()) return Status(weights.status().code(), "--load-weights " + weights.status().message());
  RETURN_IF_ERROR(CheckFinite(*weights, "--load-weights " + path));
  std::vector<std::pair<std::string, Tensor>> named;
  for (NamedTensor& t : weights->tensors) named.emplace_back(t.name, t.tensor);
  Model::LoadReport report;
  const Status loaded = model.LoadStateDict(named, &report);
  if (!loaded.ok()) return InvalidArgument("--load-weights " + path + ": " + loaded.message());
  if (announce && !report.dropped.empty()) {
    std::printf("ddp_train: --load-weights %s: dropped %zu tensor%s %s does not use: %s\n", path.c_str(),
                report.dropped.size(), report.dropped.size() == 1 ? "" : "s", model_name.c_str(),
                List(report.dropped).c_str());
  }
  if (announce && !report.fresh.empty()) {
    std::printf("ddp_train: --load-weights %s: initialized %zu new tensor%s: %s\n", path.c_str(), report.fresh.size(),
                report.fresh.size() == 1 ? "" : "s", List(report.fresh).c_str());
  }
  return Status::Ok();
}

Status SaveWeightsFile(const std::string& path, Model& model, ExecutionContext& ctx, const std::string& model_name) {
  for (const auto& [name, t] : model.StateDict()) {
    if (t.dtype() == DType::kF32 && !AllFinite(ctx, t)) {
      return FailedPrecondition("--save-weights " + path + ": tensor '" + name + "' holds non-finite values; not written");
    }
  }
  std::vector<NamedTensor> named;
  for (auto& [name, t] : model.StateDict()) named.push_back({name, t.To(Device::Cpu())});
  const Status saved = WriteSafetensors(path, named, {{"format", "pt"}, {"model", model_name}});
  if (!saved.ok()) return Status(saved.code(), "--save-weights " + saved.message());
  return Status::Ok();
}

}  // namespace ddp
