#include "launch/weights_file.h"

#include <cstdio>
#include <memory>
#include <unordered_map>
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

Status SaveWeightsFileInPieces(const std::string& path, Model& model, ExecutionContext& ctx,
                               const std::string& model_name, bool writes,
                               const std::function<Status(const FlatPieceVisitor&)>& pieces) {
  const std::string what = "--save-weights " + path;
  auto non_finite = [&](const std::string& name) {
    return FailedPrecondition(what + ": tensor '" + name + "' holds non-finite values; not written");
  };
  const std::vector<Model::StateSource> sources = model.StateSources();
  std::vector<TensorLayout> layouts;
  std::unordered_map<const Parameter*, std::vector<size_t>> entries;  // a tied weight has two
  for (const Model::StateSource& s : sources) {
    if (s.param != nullptr) entries[s.param].push_back(layouts.size());
    layouts.push_back(s.param != nullptr ? TensorLayout{s.name, DType::kF32, s.param->shape}
                                         : TensorLayout{s.name, s.buffer.dtype(), s.buffer.shape()});
  }
  // The buffers (batch norm's statistics, which differ between ranks) are
  // the writer's own; a failure waits until every bucket has gone round,
  // as the other ranks' gathers need this one.
  std::unique_ptr<SafetensorsFileWriter> writer;
  Status written;
  for (const Model::StateSource& s : sources) {
    if (writes && written.ok() && s.param == nullptr && s.buffer.dtype() == DType::kF32 && !AllFinite(ctx, s.buffer)) {
      written = non_finite(s.name);
    }
  }
  if (writes && written.ok()) {
    StatusOr<std::unique_ptr<SafetensorsFileWriter>> w =
        SafetensorsFileWriter::Create(path, layouts, {{"format", "pt"}, {"model", model_name}});
    if (w.ok()) {
      writer = std::move(*w);
    } else {
      written = w.status();
    }
  }
  const Status visited = pieces([&](int64_t offset, const Tensor& values) -> Status {
    const Tensor host = writer != nullptr ? values.To(Device::Cpu()) : Tensor();
    const Parameter* bad = nullptr;
    ForEachParameterIn(model, offset, values.numel(), [&](const Parameter& p, int64_t at, int64_t from, int64_t n) {
      if (bad == nullptr && !AllFinite(ctx, values.View(from, {n}))) bad = &p;
      if (bad != nullptr || writer == nullptr) return;
      for (size_t entry : entries[&p]) {
        if (written.ok()) written = writer->Write(entry, at * 4, host.data<float>() + from, n * 4);
      }
    });
    return bad != nullptr ? non_finite(bad->name) : Status::Ok();
  });
  RETURN_IF_ERROR(visited);
  if (writer != nullptr && written.ok()) {
    for (size_t k = 0; k < sources.size() && written.ok(); ++k) {
      if (sources[k].param != nullptr) continue;
      const Tensor host = sources[k].buffer.To(Device::Cpu());
      written = writer->Write(k, 0, host.raw_data(), host.nbytes());
    }
    if (written.ok()) written = writer->Commit();
  }
  if (!written.ok() && written.message().rfind(what, 0) != 0) {
    return Status(written.code(), "--save-weights " + written.message());
  }
  return written;
}

}  // namespace ddp
