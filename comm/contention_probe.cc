#include "comm/contention_probe.h"

#include "nlohmann/json.hpp"
#include "runtime/clock.h"
#include "runtime/median.h"

namespace ddp {

std::string ContentionResultJson(const ContentionResult& r, const std::string& model) {
  auto load = [](const ContentionLoad& l) {
    return nlohmann::ordered_json{{"bytes", l.bytes},
                                  {"backward_s", l.backward_s},
                                  {"collectives_per_backward", l.collectives},
                                  {"collective_quiet_s", l.collective_quiet_s},
                                  {"collective_loaded_s", l.collective_loaded_s}};
  };
  nlohmann::ordered_json j = {{"format", "ddp_train contention probe 2"},
                              {"model", model},
                              {"ranks", r.ranks},
                              {"loaded_steps", r.loaded_steps},
                              {"quiet_steps", r.quiet_steps},
                              {"loaded_collectives", r.loaded_collectives},
                              {"quiet_collectives", r.quiet_collectives},
                              {"compute_quiet_s", r.compute_quiet_s},
                              {"large", load(r.large)}};
  if (r.small.bytes > 0) j["small"] = load(r.small);
  j["collective_cold_s"] = r.collective_cold_s;
  j["compute_slowdown"] = r.fitted.compute_slowdown;
  j["comm_slowdown"] = r.fitted.comm_slowdown;
  j["compute_per_collective_ms"] = r.fitted.compute_per_collective_s * 1e3;
  j["comm_per_collective_ms"] = r.fitted.comm_per_collective_s * 1e3;
  return j.dump(1) + "\n";
}

ContentionProbe::ContentionProbe(Communicator* comm, int64_t bytes, int64_t small_bytes) : comm_(comm) {
  for (int64_t b : {bytes, small_bytes}) {
    if (b <= 0) continue;
    sizes_.emplace_back();
    sizes_.back().buffer = Tensor::Zeros({std::max<int64_t>(1, b / 4)}, DType::kF32);
  }
}

ContentionProbe::~ContentionProbe() {
  computing_ = false;
  if (load_.joinable()) load_.join();
}

Status ContentionProbe::Meet() {
  Tensor token = Tensor::Zeros({1}, DType::kF32);
  return comm_->AllReduce(token, ReduceOp::kSum)->Wait();
}

void ContentionProbe::LoadLoop(Size* size) {
  float* flag = size->buffer.data<float>();
  const float world = static_cast<float>(comm_->world_size());
  for (;;) {
    // How many ranks have finished their compute, as each enters this
    // collective; every rank sees the same sum and stops at the same one.
    const bool computing = computing_;
    *flag = computing ? 0.0f : 1.0f;
    if (computing) ++started_;
    const double start = SteadySeconds();
    load_status_ = comm_->AllReduce(size->buffer, ReduceOp::kSum)->Wait();
    if (!load_status_.ok()) return;
    const double seconds = SteadySeconds() - start;
    // Every rank was in its backward when it began, and this one still is.
    if (*flag == 0.0f && computing_) size->collective_loaded.push_back(seconds);
    if (*flag == world) return;
  }
}

Status ContentionProbe::StepStarting(bool timed) {
  timed_ = timed;
  // Timed steps: loaded (the large size), quiet, loaded (the small), quiet...
  loaded_ = nullptr;
  if (timed && timed_steps_ % 2 == 0) loaded_ = &sizes_[(timed_steps_ / 2) % sizes_.size()];
  if (timed) ++timed_steps_;
  // Every rank starts its step at once, as DDP's ranks do.
  return Meet();
}

void ContentionProbe::BackwardStarted() {
  started_ = 0;
  computing_ = true;
  if (loaded_ != nullptr && !load_.joinable()) load_ = std::thread([this, size = loaded_] { LoadLoop(size); });
}

void ContentionProbe::BackwardFinished() { computing_ = false; }

Status ContentionProbe::StepFinished(double backward_s) {
  computing_ = false;
  if (loaded_ != nullptr) {
    if (!load_.joinable()) return Internal("the contention probe's loaded step had no backward");
    load_.join();
    RETURN_IF_ERROR(load_status_);
    loaded_->backward_loaded.push_back(backward_s);
    loaded_->collectives.push_back(static_cast<double>(started_));
    return Status::Ok();
  }
  if (!timed_) return Status::Ok();
  compute_quiet_.push_back(backward_s);
  // Each size's all-reduce with every rank's compute done, after the ranks
  // meet: the large one's first on a link idle through the step (cold),
  // then the others back to back.
  RETURN_IF_ERROR(Meet());
  for (Size& size : sizes_) {
    size.buffer.data<float>()[0] = 0.0f;
    for (int k = 0; k <= kQuietCollectives; ++k) {
      const double start = SteadySeconds();
      RETURN_IF_ERROR(comm_->AllReduce(size.buffer, ReduceOp::kSum)->Wait());
      const double seconds = SteadySeconds() - start;
      if (k > 0) {
        size.collective_quiet.push_back(seconds);
      } else if (&size == &sizes_[0]) {
        collective_cold_.push_back(seconds);
      }
    }
  }
  return Status::Ok();
}

StatusOr<ContentionResult> ContentionProbe::Finish() {
  // Per size: backward loaded, collectives per backward, quiet and loaded
  // all-reduce, loaded and quiet counts; then backward quiet, the cold
  // all-reduce, and whether this rank has every figure.
  constexpr int kPerSize = 6;
  bool complete = !compute_quiet_.empty();
  std::vector<double> figures;
  for (const Size& size : sizes_) {
    complete = complete && !size.backward_loaded.empty() && !size.collective_loaded.empty();
    for (double f : {Median(size.backward_loaded), Median(size.collectives), Median(size.collective_quiet),
                     Median(size.collective_loaded), static_cast<double>(size.collective_loaded.size()),
                     static_cast<double>(size.collective_quiet.size())}) {
      figures.push_back(f);
    }
  }
  const size_t common = figures.size();
  figures.push_back(Median(compute_quiet_));
  figures.push_back(Median(collective_cold_));
  figures.push_back(complete ? 1.0 : 0.0);
  Tensor sums = Tensor::FromVector<double>(figures, {static_cast<int64_t>(figures.size())});
  RETURN_IF_ERROR(comm_->AllReduce(sums, ReduceOp::kSum)->Wait());
  const double* s = sums.data<double>();
  const int n = comm_->world_size();
  ContentionResult r;
  r.ranks = n;
  r.quiet_steps = static_cast<int64_t>(compute_quiet_.size());
  for (const Size& size : sizes_) r.loaded_steps += static_cast<int64_t>(size.backward_loaded.size());
  if (s[common + 2] < n) {
    return FailedPrecondition(
        "the contention probe needs a quiet timed step and a loaded one of each size on every rank, and an "
        "all-reduce of " + std::to_string(sizes_[0].buffer.numel() * 4) + " bytes that ran wholly inside backward: "
        "run more steps, or a smaller --contention-probe-mb");
  }
  r.compute_quiet_s = s[common] / n;
  r.collective_cold_s = s[common + 1] / n;
  for (size_t k = 0; k < sizes_.size(); ++k) {
    const double* f = s + k * kPerSize;
    ContentionLoad& load = k == 0 ? r.large : r.small;
    load.bytes = sizes_[k].buffer.numel() * 4;
    load.backward_s = f[0] / n;
    load.collectives = f[1] / n;
    load.collective_quiet_s = f[2] / n;
    load.collective_loaded_s = f[3] / n;
    r.loaded_collectives += static_cast<int64_t>(f[4]);
    r.quiet_collectives += static_cast<int64_t>(f[5]);
  }
  r.fitted = FitContention(r.compute_quiet_s, r.large, sizes_.size() > 1 ? &r.small : nullptr);
  return r;
}

}  // namespace ddp
