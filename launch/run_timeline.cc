#include "launch/run_timeline.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "comm/watchdog.h"
#include "runtime/clock.h"
#include "runtime/durable_files.h"
#include "runtime/median.h"
#include "runtime/timeline.h"

namespace ddp {

Status RunTimeline::Start(Communicator* comm, const ExecutionContext& ctx) {
  // Each rank's clock against rank 0's: after a barrier every rank reads
  // its clock at about the same instant; the median of 5 rounds.
  constexpr int kRounds = 5;
  std::vector<std::vector<double>> seen(options_.world_size);
  for (int round = 0; round < kRounds; ++round) {
    if (comm != nullptr) RETURN_IF_ERROR(comm->Barrier()->Wait());
    Tensor mine = Tensor::FromVector<double>({SteadySeconds()}, {1});
    Tensor all = mine;
    if (comm != nullptr) {
      all = Tensor::Empty({options_.world_size}, DType::kF64);
      const CollectiveLabel label("the timeline's clock comparison");
      RETURN_IF_ERROR(comm->AllGather(mine, all)->Wait());
    }
    if (round == 0) zero_ = all.data<double>()[0];
    for (int r = 0; r < options_.world_size; ++r) seen[r].push_back(all.data<double>()[r] - all.data<double>()[0]);
  }
  offsets_.clear();
  for (auto& d : seen) offsets_.push_back(MedianOfKnownOrZero(d));
  const bool gpu = ctx.device().is_cuda();
  Timeline::Get().Start(gpu ? ctx.device().index : -1, gpu ? ctx.cuda_stream() : nullptr);
  return Status::Ok();
}

void RunTimeline::AddBucketEvents(const ReduceStats& stats, const char* kind) {
  Timeline& t = Timeline::Get();
  if (!t.enabled()) return;
  for (size_t k = 0; k < stats.buckets.size(); ++k) {
    const BucketTiming& b = stats.buckets[k];
    if (b.finished < 0.0) continue;  // the host never saw it finish
    t.Add(std::string(kind) + " bucket " + std::to_string(k), "collective", Timeline::kCommTrack,
          stats.backward_start + b.launched, b.finished - b.launched);
  }
}

Status RunTimeline::Write(Communicator* comm, int64_t last_run_step) {
  Timeline& t = Timeline::Get();
  t.Stop();
  // This rank's events on rank 0's clock, in microseconds from its start.
  const double offset = offsets_[options_.rank];
  const char* tracks[] = {"compute", "communication", "input"};
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", options_.rank},
                    {"args", {{"name", "rank " + std::to_string(options_.rank)}}}});
  for (int track = 0; track < 3; ++track) {
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", options_.rank}, {"tid", track},
                      {"args", {{"name", tracks[track]}}}});
  }
  for (const TimelineEvent& e : t.Take()) {
    events.push_back({{"name", e.name}, {"cat", e.category}, {"ph", "X"}, {"pid", options_.rank}, {"tid", e.track},
                      {"ts", (e.start - offset - zero_) * 1e6}, {"dur", e.duration * 1e6},
                      {"args", {{"step", e.step}}}});
  }
  std::string mine = events.dump();
  std::vector<std::string> every = {mine};
  if (comm != nullptr) {
    // Sizes, then the texts padded to the longest.
    Tensor size = Tensor::FromVector<int64_t>({static_cast<int64_t>(mine.size())}, {1});
    Tensor sizes = Tensor::Empty({options_.world_size}, DType::kI64);
    const CollectiveLabel label("the gather of every rank's timeline");
    RETURN_IF_ERROR(comm->AllGather(size, sizes)->Wait());
    int64_t longest = 0;
    for (int r = 0; r < options_.world_size; ++r) longest = std::max(longest, sizes.data<int64_t>()[r]);
    Tensor text = Tensor::Zeros({longest}, DType::kU8);
    std::memcpy(text.raw_data(), mine.data(), mine.size());
    Tensor texts = Tensor::Empty({longest * options_.world_size}, DType::kU8);
    RETURN_IF_ERROR(comm->AllGather(text, texts)->Wait());
    every.clear();
    for (int r = 0; r < options_.world_size; ++r) {
      every.emplace_back(reinterpret_cast<const char*>(texts.data<uint8_t>()) + r * longest,
                         static_cast<size_t>(sizes.data<int64_t>()[r]));
    }
  }
  if (options_.rank != 0) return Status::Ok();
  std::string out = "{\"traceEvents\": [";
  bool first = true;
  for (const std::string& rank_events : every) {
    const std::string inner = rank_events.substr(1, rank_events.size() - 2);  // the array's elements
    if (inner.empty()) continue;
    out += (first ? "" : ",") + inner;
    first = false;
  }
  nlohmann::json offsets = offsets_;
  out += "], \"displayTimeUnit\": \"ms\", \"otherData\": {\"clock_offsets_s\": " + offsets.dump() +
         ", \"steps\": \"" + std::to_string(options_.first_step) + ":" + std::to_string(options_.last_step) +
         "\"}}\n";
  const Status written = WriteFileDurably(options_.path, out);
  if (!written.ok()) return Status(written.code(), "--timeline " + written.message());
  std::printf("timeline: %s (steps %lld to %lld; open it in a browser's trace viewer, e.g. ui.perfetto.dev)\n",
              options_.path.c_str(), static_cast<long long>(options_.first_step),
              static_cast<long long>(std::min(options_.last_step, last_run_step)));
  return Status::Ok();
}

}  // namespace ddp
