#include "launch/fault_injection.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <thread>

#include "runtime/cuda/cuda_device.h"

namespace ddp {
namespace {

const char* Variable(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// "A:B" into two numbers: A >= 0 (a rank), B > 0 (a 1-based step or a
// time); unset leaves them as they are.
template <typename A, typename B>
Status ReadPair(const char* name, const char* form, A* a, B* b) {
  const char* value = Variable(name);
  if (value == nullptr) return Status::Ok();
  long long first = 0, second = 0;
  int used = 0;
  if (std::sscanf(value, "%lld:%lld%n", &first, &second, &used) != 2 || value[used] != '\0' || first < 0 ||
      second <= 0) {
    return InvalidArgument(std::string(name) + " '" + value + "' is not " + form);
  }
  *a = static_cast<A>(first);
  *b = static_cast<B>(second);
  return Status::Ok();
}

Status ReadCount(const char* name, const char* form, int* out) {
  const char* value = Variable(name);
  if (value == nullptr) return Status::Ok();
  int used = 0;
  if (std::sscanf(value, "%d%n", out, &used) != 1 || value[used] != '\0' || *out < 0) {
    return InvalidArgument(std::string(name) + " '" + value + "' is not " + form);
  }
  return Status::Ok();
}

// DDP_TEST_SLOW_LOADER_MS: a source whose batches take longer to load.
class SlowedSource : public BatchSource {
 public:
  SlowedSource(std::unique_ptr<BatchSource> data, int ms) : data_(std::move(data)), ms_(ms) {}
  int64_t size() const override { return data_->size(); }
  std::vector<TensorSpec> Specs(int64_t count) const override { return data_->Specs(count); }
  void Fill(const int64_t* indices, int64_t count, int64_t epoch, Batch& batch) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
    data_->Fill(indices, count, epoch, batch);
  }
  bool ReadsFiles() const override { return data_->ReadsFiles(); }
  const char* sample_noun() const override { return data_->sample_noun(); }
  int64_t tokens_per_sample() const override { return data_->tokens_per_sample(); }
  std::string Describe() const override { return data_->Describe() + " (slowed by " + std::to_string(ms_) + " ms)"; }

 private:
  std::unique_ptr<BatchSource> data_;
  int ms_;
};

constexpr uint64_t kFnvStart = 1469598103934665603ull;
uint64_t Fnv1a(uint64_t hash, const void* data, size_t n) {
  const unsigned char* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) hash = (hash ^ bytes[i]) * 1099511628211ull;
  return hash;
}
uint64_t Fnv1a(uint64_t hash, const Tensor& t) {
  const Tensor host = t.To(Device::Cpu());
  return Fnv1a(hash, host.raw_data(), host.nbytes());
}

}  // namespace

void PrintStateDigest(int rank, int64_t step, const std::vector<Tensor>& master_weights,
                      const std::vector<Tensor>& optimizer_state, int64_t optimizer_steps, double loss_scale) {
  uint64_t hash = kFnvStart;
  for (const Tensor& t : master_weights) hash = Fnv1a(hash, t);
  for (const Tensor& t : optimizer_state) hash = Fnv1a(hash, t);
  hash = Fnv1a(hash, &optimizer_steps, sizeof(optimizer_steps));
  // The scale printed apart: a skipped step changes it alone.
  std::printf("state digest: rank %d step %lld %016llx scale %g optimizer steps %lld\n", rank,
              static_cast<long long>(step), static_cast<unsigned long long>(hash), loss_scale,
              static_cast<long long>(optimizer_steps));
  std::fflush(stdout);
}

void PrintEvalDigest(int rank, int64_t optimizer_steps, const std::vector<Tensor>& buffers, const Tensor& parameters) {
  uint64_t hash = kFnvStart;
  for (const Tensor& b : buffers) hash = Fnv1a(hash, b);
  std::printf("eval digest: rank %d step %lld buffers %016llx parameters %016llx\n", rank,
              static_cast<long long>(optimizer_steps), static_cast<unsigned long long>(hash),
              static_cast<unsigned long long>(Fnv1a(kFnvStart, parameters)));
  std::fflush(stdout);
}

StatusOr<FaultInjection> FaultInjection::FromEnvironment() {
  FaultInjection f;
  // STEP:RANK, the one hook written step first.
  if (const char* value = Variable("DDP_TEST_INJECT_NONFINITE_GRAD")) {
    long long step = 0;
    int rank = -1, used = 0;
    if (std::sscanf(value, "%lld:%d%n", &step, &rank, &used) != 2 || value[used] != '\0' || step <= 0 || rank < 0) {
      return InvalidArgument(std::string("DDP_TEST_INJECT_NONFINITE_GRAD '") + value + "' is not STEP:RANK");
    }
    f.nonfinite_step = step;
    f.nonfinite_rank = rank;
  }
  if (const char* crash = std::getenv("DDP_TEST_CHECKPOINT_CRASH"); crash != nullptr) f.checkpoint_crash = crash;
  RETURN_IF_ERROR(ReadPair("DDP_TEST_STOP_IN_BACKWARD", "RANK:STEP", &f.stop_in_backward_rank,
                           &f.stop_in_backward_step));
  RETURN_IF_ERROR(ReadPair("DDP_TEST_THROW", "RANK:STEP", &f.throw_rank, &f.throw_step));
  RETURN_IF_ERROR(ReadPair("DDP_TEST_BUSY_GPU", "RANK:STEP", &f.busy_gpu_rank, &f.busy_gpu_step));
  RETURN_IF_ERROR(ReadPair("DDP_TEST_SLOW_RANK", "RANK:MS", &f.slow_rank, &f.slow_rank_ms));
  RETURN_IF_ERROR(ReadCount("DDP_TEST_SLOW_LOADER_MS", "a count of milliseconds", &f.slow_loader_ms));
  RETURN_IF_ERROR(ReadCount("DDP_TEST_STOP_AT_END", "a rank", &f.stop_at_end_rank));
  const char* digest = std::getenv("DDP_TEST_STATE_DIGEST");
  f.print_state_digest = digest != nullptr && std::string(digest) == "1";
  return f;
}

void FaultInjection::BetweenForwardAndBackward(int64_t step, int64_t micro, int rank, ExecutionContext& ctx,
                                               int64_t first_sample, double comm_timeout_s) const {
  if (micro != 0) return;
  if (step == stop_in_backward_step && rank == stop_in_backward_rank) std::raise(SIGSTOP);
  if (step == busy_gpu_step && rank == busy_gpu_rank && ctx.device().is_cuda()) {
    cuda::BusyStream(ctx.cuda_stream(), comm_timeout_s + 4.0);
  }
  if (rank == slow_rank) std::this_thread::sleep_for(std::chrono::milliseconds(slow_rank_ms));
  if (step == throw_step && rank == throw_rank) {
    throw InputError("rank " + std::to_string(rank) + " cannot read sample " + std::to_string(first_sample) +
                     ": it is corrupt (DDP_TEST_THROW)");
  }
}

void FaultInjection::PoisonGradients(int64_t step, int rank, const std::vector<Tensor>& held) const {
  if (!NonfiniteGradientAt(step, rank)) return;
  for (const Tensor& g : held) {
    if (g.numel() == 0) continue;
    Tensor first = g.View(0, {1});
    first.Fill(std::numeric_limits<double>::infinity());
    return;
  }
}

std::unique_ptr<BatchSource> FaultInjection::SlowLoader(std::unique_ptr<BatchSource> data) const {
  if (slow_loader_ms <= 0) return data;
  return std::make_unique<SlowedSource>(std::move(data), slow_loader_ms);
}

void FaultInjection::AtEnd(int rank) const {
  if (rank == stop_at_end_rank) std::raise(SIGSTOP);
}

}  // namespace ddp
