#include "comm/contention_probe.h"

#include "nlohmann/json.hpp"
#include "runtime/clock.h"
#include "runtime/median.h"

namespace ddp {

std::string ContentionResultJson(const ContentionResult& r, const std::string& model) {
  const nlohmann::ordered_json j = {{"format", "ddp_train contention probe 1"},
                                    {"model", model},
                                    {"ranks", r.ranks},
                                    {"bytes", r.bytes},
                                    {"loaded_steps", r.loaded_steps},
                                    {"quiet_steps", r.quiet_steps},
                                    {"loaded_collectives", r.loaded_collectives},
                                    {"quiet_collectives", r.quiet_collectives},
                                    {"compute_quiet_s", r.compute_quiet_s},
                                    {"compute_loaded_s", r.compute_loaded_s},
                                    {"collective_quiet_s", r.collective_quiet_s},
                                    {"collective_loaded_s", r.collective_loaded_s},
                                    {"collective_cold_s", r.collective_cold_s},
                                    {"compute_slowdown", r.compute_slowdown()},
                                    {"comm_slowdown", r.comm_slowdown()}};
  return j.dump(1) + "\n";
}

ContentionProbe::ContentionProbe(Communicator* comm, int64_t bytes)
    : comm_(comm), buffer_(Tensor::Zeros({std::max<int64_t>(1, bytes / 4)}, DType::kF32)) {}

ContentionProbe::~ContentionProbe() {
  computing_ = false;
  if (load_.joinable()) load_.join();
}

Status ContentionProbe::Meet() {
  Tensor token = Tensor::Zeros({1}, DType::kF32);
  return comm_->AllReduce(token, ReduceOp::kSum)->Wait();
}

void ContentionProbe::LoadLoop() {
  float* flag = buffer_.data<float>();
  const float world = static_cast<float>(comm_->world_size());
  for (;;) {
    // How many ranks have finished their compute, as each enters this
    // collective; every rank sees the same sum and stops at the same one.
    *flag = computing_ ? 0.0f : 1.0f;
    const double start = SteadySeconds();
    load_status_ = comm_->AllReduce(buffer_, ReduceOp::kSum)->Wait();
    if (!load_status_.ok()) return;
    const double seconds = SteadySeconds() - start;
    // Every rank was in its backward when it began, and this one still is.
    if (*flag == 0.0f && computing_) collective_loaded_.push_back(seconds);
    if (*flag == world) return;
  }
}

Status ContentionProbe::StepStarting(bool timed) {
  timed_ = timed;
  loaded_ = timed && timed_steps_ % 2 == 0;
  if (timed) ++timed_steps_;
  // Every rank starts its step at once, as DDP's ranks do.
  return Meet();
}

void ContentionProbe::BackwardStarted() {
  computing_ = true;
  if (loaded_ && !load_.joinable()) load_ = std::thread([this] { LoadLoop(); });
}

void ContentionProbe::BackwardFinished() { computing_ = false; }

Status ContentionProbe::StepFinished(double backward_s) {
  computing_ = false;
  if (loaded_) {
    if (!load_.joinable()) return Internal("the contention probe's loaded step had no backward");
    load_.join();
    RETURN_IF_ERROR(load_status_);
    compute_loaded_.push_back(backward_s);
    return Status::Ok();
  }
  if (!timed_) return Status::Ok();
  compute_quiet_.push_back(backward_s);
  // The same all-reduce with every rank's compute done, after the ranks
  // meet: the first on a link idle through the step (cold), then the
  // others back to back.
  buffer_.data<float>()[0] = 0.0f;
  RETURN_IF_ERROR(Meet());
  for (int k = 0; k <= kQuietCollectives; ++k) {
    const double start = SteadySeconds();
    RETURN_IF_ERROR(comm_->AllReduce(buffer_, ReduceOp::kSum)->Wait());
    (k == 0 ? collective_cold_ : collective_quiet_).push_back(SteadySeconds() - start);
  }
  return Status::Ok();
}

StatusOr<ContentionResult> ContentionProbe::Finish() {
  const bool complete = !compute_quiet_.empty() && !compute_loaded_.empty() && !collective_loaded_.empty();
  Tensor sums = Tensor::FromVector<double>(
      {Median(compute_quiet_), Median(compute_loaded_), Median(collective_quiet_), Median(collective_loaded_),
       complete ? 1.0 : 0.0, static_cast<double>(collective_loaded_.size()),
       static_cast<double>(collective_quiet_.size()), Median(collective_cold_)},
      {8});
  RETURN_IF_ERROR(comm_->AllReduce(sums, ReduceOp::kSum)->Wait());
  const double* s = sums.data<double>();
  const int n = comm_->world_size();
  ContentionResult r;
  r.ranks = n;
  r.bytes = buffer_.numel() * 4;
  r.loaded_steps = static_cast<int64_t>(compute_loaded_.size());
  r.quiet_steps = static_cast<int64_t>(compute_quiet_.size());
  if (s[4] < n) {
    return FailedPrecondition(
        "the contention probe needs a loaded and a quiet timed step on every rank, and an all-reduce of " +
        std::to_string(r.bytes) + " bytes that ran wholly inside backward: run more steps, or a smaller "
        "--contention-probe-mb");
  }
  r.compute_quiet_s = s[0] / n;
  r.compute_loaded_s = s[1] / n;
  r.collective_quiet_s = s[2] / n;
  r.collective_loaded_s = s[3] / n;
  r.collective_cold_s = s[7] / n;
  r.loaded_collectives = static_cast<int64_t>(s[5]);
  r.quiet_collectives = static_cast<int64_t>(s[6]);
  return r;
}

}  // namespace ddp
