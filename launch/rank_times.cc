#include "launch/rank_times.h"

#include <cstdio>

#include "comm/watchdog.h"
#include "runtime/median.h"

namespace ddp {
namespace {

constexpr double kStragglerShare = 1.10;
constexpr int64_t kStragglerMinSteps = 5;

}  // namespace

StatusOr<RankTimes> GatherRankTimes(Communicator* comm, const std::vector<double>& compute,
                                    const std::vector<double>& wait) {
  Tensor mine = Tensor::FromVector<double>({MedianOfKnown(compute), MedianOfKnown(wait), QuarterOfKnown(compute)}, {3});
  Tensor all = mine;
  const int world = comm != nullptr ? comm->world_size() : 1;
  if (comm != nullptr) {
    all = Tensor::Empty({3 * world}, DType::kF64);
    const CollectiveLabel label("the gather of every rank's step times");
    RETURN_IF_ERROR(comm->AllGather(mine, all)->Wait());
  }
  RankTimes times;
  times.samples = static_cast<int64_t>(compute.size());
  for (int r = 0; r < world; ++r) {
    times.compute.push_back(all.data<double>()[3 * r]);
    times.wait.push_back(all.data<double>()[3 * r + 1]);
    times.compute_quarter.push_back(all.data<double>()[3 * r + 2]);
  }
  return times;
}

nlohmann::ordered_json Spread(const std::vector<double>& by_rank) {
  double lo = 0.0, hi = -1.0;
  int slowest = -1;
  for (size_t r = 0; r < by_rank.size(); ++r) {
    if (by_rank[r] < 0.0) continue;
    if (slowest < 0 || by_rank[r] < lo) lo = by_rank[r];
    if (slowest < 0 || by_rank[r] > hi) hi = by_rank[r], slowest = static_cast<int>(r);
  }
  return {{"min", lo}, {"median", MedianOfKnown(by_rank)}, {"max", hi}, {"slowest_rank", slowest},
          {"by_rank", by_rank}};
}

std::vector<std::string> StragglerWarnings(const RankTimes& times) {
  std::vector<std::string> lines;
  if (times.samples < kStragglerMinSteps) return lines;
  for (size_t r = 0; r < times.compute.size() && times.compute.size() > 1; ++r) {
    std::vector<double> others = times.compute;
    others.erase(others.begin() + static_cast<std::ptrdiff_t>(r));
    const double reference = MedianOfKnown(others), mine = times.compute[r];
    if (reference <= 0.0 || mine <= kStragglerShare * reference || times.compute_quarter[r] <= reference) continue;
    char line[512];
    std::snprintf(line, sizeof(line),
                  "ddp_train: warning: rank %zu is a straggler: its median compute time, %.3f s a step, is %.0f%% "
                  "above the other ranks' %.3f s, and in synchronous data parallelism every rank waits for it (look "
                  "at that GPU's clocks, temperature and PCIe link, or at its node's load)",
                  r, mine, 100.0 * (mine / reference - 1.0), reference);
    lines.push_back(line);
  }
  return lines;
}

}  // namespace ddp
