#include "launch/run_reporter.h"

#include <cstdarg>
#include <algorithm>
#include <cstdio>

#include "launch/progress.h"
#include "runtime/byte_size.h"

namespace ddp {
namespace {

constexpr double kMiB = 1048576.0;

// printf onto the end of `out`.
void Append(std::string& out, const char* format, ...) {
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string piece(static_cast<size_t>(n), '\0');
  std::vsnprintf(piece.data(), piece.size() + 1, format, again);
  va_end(again);
  out += piece;
}

// "working copy 640.0 MiB  " in mixed precision (the 16-bit weights, and
// under ZeRO the f32 values the forward reads), else "".
std::string LowPrecisionPiece(const MemoryFigures& m) {
  if (m.low_precision_bytes == 0) return "";
  char piece[64];
  std::snprintf(piece, sizeof(piece), "working copy %.1f MiB  ", m.low_precision_bytes / (1024.0 * 1024.0));
  return piece;
}

nlohmann::ordered_json MemoryJson(const MemoryFigures& m) {
  return {{"param_bytes", m.param_bytes},
          {"grad_bytes", m.grad_bytes},
          {"optimizer_bytes", m.optimizer_bytes},
          {"transient_bucket_bytes", m.transient_bucket_bytes},
          {"activation_peak_bytes", m.activation_peak_bytes},
          {"peak_bytes", m.peak_bytes},
          {"allocated_bytes", m.allocated_bytes},
          {"reserved_bytes", m.reserved_bytes},
          {"peak_resident_bytes", m.peak_resident_bytes},
          {"low_precision_bytes", m.low_precision_bytes},
          {"buffer_bytes", m.buffer_bytes},
          {"workspace_bytes", m.workspace_bytes},
          {"gathered_parameter_peak_bytes", m.gathered_parameter_peak_bytes},
          {"split_gradient_peak_bytes", m.split_gradient_peak_bytes}};
}

}  // namespace

std::string StartLine(const RunStart& r) {
  std::string out;
  Append(out,
         "ddp_train: %s, %lld parameters, %d rank%s x %d threads on %s, batch %lld x %lld micro-batches per rank, "
         "%lld steps, %s lr %g, %s",
         r.model.c_str(), static_cast<long long>(r.parameters), r.world_size, r.world_size == 1 ? "" : "s", r.threads,
         r.device.c_str(), static_cast<long long>(r.batch_size), static_cast<long long>(r.accumulation_steps),
         static_cast<long long>(r.steps), r.optimizer.c_str(), r.lr, r.data.c_str());
  return out;
}

// What a rank sent, by collective, and in all.
nlohmann::ordered_json TrafficJson(const Traffic& t) {
  return {{"all_reduce", t.all_reduce},
          {"reduce_scatter", t.reduce_scatter},
          {"all_gather", t.all_gather},
          {"broadcast", t.broadcast},
          {"total", t.total()}};
}

nlohmann::ordered_json StepJson(const StepRecord& r) {
  const double samples_per_s = static_cast<double>(r.samples_per_step) / r.seconds;
  nlohmann::ordered_json j = {{"step", r.step},
                              {"loss", r.loss},
                              {"lr", r.lr},
                              {"step_time_s", r.seconds},
                              {"samples_per_s", samples_per_s}};
  if (r.seq_len > 0) {
    // Every position of the batch, padding included; and the real ones.
    j["tokens_per_s"] = static_cast<double>(r.samples_per_step * r.seq_len) / r.seconds;
    j["real_tokens_per_s"] = static_cast<double>(r.tokens) / r.seconds;
  }
  if (r.loss_scaling) {
    j["loss_scale"] = r.loss_scale;
    j["skipped"] = r.skipped;
  }
  if (r.graphed) j["cuda_graph"] = true;
  j["input_wait_s"] = r.input_wait_s;
  if (r.replaced_samples > 0) j["replaced_samples"] = r.replaced_samples;
  if (r.checkpoint_committed) j["checkpoint_committed"] = *r.checkpoint_committed;
  if (r.checkpoint_stall_s) j["checkpoint_stall_s"] = *r.checkpoint_stall_s;
  if (r.distributed && !r.graphed) {  // a replayed step has no bucket timings
    j["exposed_comm_s"] = r.exposed_comm_s;
    // Per bucket, in launch order: seconds after backward began that it
    // launched and finished, and how long the step waited on it.
    nlohmann::ordered_json buckets = nlohmann::ordered_json::array();
    for (const StepRecord::Bucket& b : r.buckets) {
      buckets.push_back({{"launched_s", b.launched_s}, {"finished_s", b.finished_s}, {"waited_s", b.waited_s}});
    }
    j["buckets"] = buckets;
  }
  if (r.eval_accuracy) j["eval_accuracy"] = *r.eval_accuracy;
  return j;
}

std::vector<std::pair<std::string, double>> RecordScalars(const nlohmann::ordered_json& record) {
  std::vector<std::pair<std::string, double>> scalars;
  for (const auto& [key, value] : record.items()) {
    if (key == "step" || !value.is_number()) continue;
    scalars.emplace_back(key == "eval_accuracy" ? "eval/accuracy" : "train/" + key, value.get<double>());
  }
  return scalars;
}

std::string StepLine(const StepRecord& r) {
  std::string out;
  Append(out, "step %5lld/%lld  loss %.4f  lr %.5f  %.3f s  %.1f %s/s", static_cast<long long>(r.step),
         static_cast<long long>(r.total_steps), r.loss, r.lr, r.seconds,
         static_cast<double>(r.samples_per_step) / r.seconds, r.noun);
  if (r.seq_len > 0) Append(out, "  %.0f tokens/s", static_cast<double>(r.samples_per_step * r.seq_len) / r.seconds);
  if (r.distributed && !r.graphed) Append(out, "  exposed comm %.3f s", r.exposed_comm_s);
  if (r.graphed) Append(out, "  cuda graph");
  if (r.loss_scaling) Append(out, "  loss scale %g", r.loss_scale);
  if (r.skipped) Append(out, "  skipped: non-finite gradients");
  if (r.eval_accuracy) Append(out, "  eval %s %.4f", r.eval_label.c_str(), *r.eval_accuracy);
  if (r.eta_s) Append(out, "  ETA %s", FormatDuration(*r.eta_s).c_str());
  return out;
}

nlohmann::ordered_json SummaryJson(const RunSummary& s) {
  nlohmann::ordered_json j = {{"model", s.model},
                              {"device", s.device},
                              {"precision", s.precision},
                              {"compute_dtype", s.compute_dtype},
                              {"memory_format", s.memory_format},
                              {"world_size", s.world_size},
                              {"batch_size", s.batch_size},
                              {"accumulation_steps", s.accumulation_steps},
                              {"zero_stage", s.zero_stage},
                              {"steps", s.steps},
                              {"samples_per_s", s.samples_per_s},
                              {"final_loss", s.final_loss}};
  if (s.exposed_comm_s) j["exposed_comm_s"] = *s.exposed_comm_s;
  if (s.distributed) {
    j["bucket_mb"] = s.bucket_mb;
    j["comm_bytes_per_step"] = TrafficJson(s.traffic_per_step);
  }
  if (s.cuda_graph_captures) j["cuda_graph_captures"] = *s.cuda_graph_captures;
  if (s.zero_gather_dtype) j["zero_gather_dtype"] = *s.zero_gather_dtype;
  if (s.loss_scaling) {
    j["loss_scale"] = s.loss_scale;
    j["skipped_steps"] = s.skipped_steps;
  }
  if (s.preempted_at_step) j["preempted_at_step"] = *s.preempted_at_step;
  j["compute_s"] = s.compute_s;
  j["comm_wait_s"] = s.comm_wait_s;
  if (!s.gpu_health.is_null() && !s.gpu_health.empty()) j["gpu_health"] = s.gpu_health;
  j["input_wait_s"] = s.input_wait_s;
  j["input_wait_share"] = s.input_wait_share;
  j["loader_threads"] = s.loader_threads;
  j["replaced_samples"] = s.replaced_samples;
  if (s.eval_accuracy) j["eval_accuracy"] = *s.eval_accuracy;
  if (s.squad_exact_match) j["squad_exact_match"] = *s.squad_exact_match;
  if (s.squad_f1) j["squad_f1"] = *s.squad_f1;
  if (s.seq_len > 0) {
    j["seq_len"] = s.seq_len;
    j["tokens_per_s"] = s.samples_per_s * static_cast<double>(s.seq_len);
    j["real_tokens_per_s"] = s.real_tokens_per_s;
  }
  j["memory"] = MemoryJson(s.memory);
  return j;
}

std::vector<std::pair<std::string, double>> SummaryScalars(const RunSummary& s) {
  std::vector<std::pair<std::string, double>> scalars = {{"summary/samples_per_s", s.samples_per_s}};
  if (s.eval_accuracy) scalars.emplace_back("eval/accuracy", *s.eval_accuracy);
  if (s.squad_exact_match) scalars.emplace_back("eval/squad_exact_match", *s.squad_exact_match);
  if (s.squad_f1) scalars.emplace_back("eval/squad_f1", *s.squad_f1);
  const nlohmann::ordered_json memory = MemoryJson(s.memory);
  for (const auto& [key, value] : memory.items()) scalars.emplace_back("memory/" + key, value.get<double>());
  return scalars;
}

std::string SummaryText(const RunSummary& s) {
  std::string out;
  Append(out, "summary: %s  %d rank%s  steps %lld  final loss %.4f  %.2f %s/s (excluding %lld warm-up steps)",
         s.model.c_str(), s.world_size, s.world_size == 1 ? "" : "s", static_cast<long long>(s.steps), s.final_loss,
         s.samples_per_s, s.noun, static_cast<long long>(s.warmup_steps));
  if (s.seq_len > 0) {
    Append(out, "  %.0f tokens/s (%.0f without padding)", s.samples_per_s * static_cast<double>(s.seq_len),
           s.real_tokens_per_s);
  }
  if (s.exposed_comm_s) Append(out, "  exposed comm %.3f s/step", *s.exposed_comm_s);
  if (s.distributed) {
    const Traffic& t = s.traffic_per_step;
    std::string kinds;
    for (const auto& [name, bytes] : {std::pair<const char*, int64_t>{"all-reduce", t.all_reduce},
                                      {"reduce-scatter", t.reduce_scatter},
                                      {"all-gather", t.all_gather},
                                      {"broadcast", t.broadcast}}) {
      if (bytes > 0) kinds += (kinds.empty() ? "" : ", ") + std::string(name) + " " + FormatBytes(bytes);
    }
    Append(out, "  sent %s/step%s", FormatBytes(t.total()).c_str(), kinds.empty() ? "" : (" (" + kinds + ")").c_str());
  }
  if (s.distributed && s.compute_s.contains("max") && s.compute_s["max"].get<double>() >= 0.0) {
    Append(out, "  compute %.3f/%.3f/%.3f s/step (min/median/max over ranks)", s.compute_s["min"].get<double>(),
           s.compute_s["median"].get<double>(), s.compute_s["max"].get<double>());
  }
  if (s.cuda_graph_captures) Append(out, "  cuda graph captures %lld", static_cast<long long>(*s.cuda_graph_captures));
  if (s.eval_accuracy) Append(out, "  eval %s %.4f", s.eval_label.c_str(), *s.eval_accuracy);
  if (s.squad_exact_match && s.squad_f1) Append(out, "  SQuAD EM %.2f F1 %.2f", *s.squad_exact_match, *s.squad_f1);
  if (s.loss_scaling) {
    Append(out, "  loss scale %g  skipped steps %lld", s.loss_scale, static_cast<long long>(s.skipped_steps));
  }
  if (s.reads_files) {
    Append(out, "  input wait %.1f%% (%d loader thread%s)", 100.0 * s.input_wait_share, s.loader_threads,
           s.loader_threads == 1 ? "" : "s");
  }
  if (s.replaced_samples > 0) {
    Append(out, "  %lld samples replaced (undecodable)", static_cast<long long>(s.replaced_samples));
  }
  const MemoryFigures& m = s.memory;
  Append(out, "  peak tensor memory %.1f MiB  peak resident %.1f MiB\n", m.peak_bytes / kMiB,
         m.peak_resident_bytes / kMiB);
  Append(out,
         "memory (rank 0): parameters %.1f MiB  gradients %.1f MiB  optimizer state %.1f MiB  %stransient buckets "
         "%.1f MiB  activations peak %.1f MiB  allocator peak %.1f MiB\n",
         m.param_bytes / kMiB, m.grad_bytes / kMiB, m.optimizer_bytes / kMiB, LowPrecisionPiece(m).c_str(),
         m.transient_bucket_bytes / kMiB, m.activation_peak_bytes / kMiB, m.peak_bytes / kMiB);
  if (static_cast<double>(s.skipped_steps) > s.max_skipped_share * static_cast<double>(s.total_steps)) {
    Append(out,
           "warning: %lld of %lld steps (%.1f%%) were skipped for non-finite gradients, more than "
           "--max-skipped-share %g; the loss scale ended at %g (try a lower --lr, or --precision bf16)\n",
           static_cast<long long>(s.skipped_steps), static_cast<long long>(s.total_steps),
           100.0 * static_cast<double>(s.skipped_steps) / static_cast<double>(s.total_steps), s.max_skipped_share,
           s.loss_scale);
  }
  return out;
}

void RunMeter::AddStep(int64_t index, double seconds, double exposed_s, int64_t tokens, double input_wait_s,
                       double compute_s, double comm_wait_s, int64_t replaced, bool skipped) {
  replaced_ += replaced;
  if (skipped) ++skipped_;
  if (!timed(index)) return;
  seconds_ += seconds;
  exposed_ += exposed_s;
  tokens_ += tokens;
  input_wait_ += input_wait_s;
  ++count_;
  if (compute_s >= 0.0) compute_times_.push_back(compute_s);
  wait_times_.push_back(comm_wait_s);
}

void RunMeter::AddStall(int64_t index, double seconds) {
  if (timed(index)) seconds_ += seconds;
}

std::optional<std::string> RunMeter::InputWaitWarning(bool last_step, int loader_threads, int prefetch) {
  constexpr double kShare = 0.05;
  if (warned_input_ || count_ == 0 || (count_ < 5 && !last_step) || input_wait_ <= kShare * seconds_) {
    return std::nullopt;
  }
  warned_input_ = true;
  std::string line;
  Append(line,
         "ddp_train: warning: waiting for input took %.1f%% of step time over %lld steps (above %.0f%%): the data "
         "loader is the bottleneck; raise --loader-threads (now %d) or --prefetch (now %d)",
         100.0 * input_wait_ / seconds_, static_cast<long long>(count_), 100.0 * kShare, loader_threads, prefetch);
  return line;
}

void RunMeter::Fill(int64_t steps, int64_t samples_per_step, bool exposed, RunSummary* summary) const {
  const int64_t timed_steps = std::max<int64_t>(1, steps - warmup_);
  summary->samples_per_s = seconds_ > 0.0 ? timed_steps * samples_per_step / seconds_ : 0.0;
  if (exposed) summary->exposed_comm_s = exposed_ / timed_steps;
  const int64_t counted = std::max<int64_t>(1, count_);  // the timed steps this process trained
  summary->traffic_per_step = {traffic_.all_reduce / counted, traffic_.reduce_scatter / counted,
                               traffic_.all_gather / counted, traffic_.broadcast / counted};
  summary->input_wait_s = input_wait_ / timed_steps;  // per timed step, the mean over ranks
  summary->input_wait_share = seconds_ > 0.0 ? input_wait_ / seconds_ : 0.0;
  summary->real_tokens_per_s = static_cast<double>(tokens_) / seconds_;
  summary->replaced_samples = replaced_;
  summary->skipped_steps = skipped_;
}

}  // namespace ddp
