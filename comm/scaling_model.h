// The scaling model: predicts a data-parallel step on P = N GPUs x M nodes
// from one rank's measured step profile (launch/step_profile.h) and a
// description of the links, before the cluster is rented.
//
// What it simulates, per step:
//   forward, then backward as profiled; each gradient bucket (the trainer's
//   own layout rule, comm/buckets.h) is ready when its last parameter's
//   gradient is, and its collective starts when it is ready and the one
//   before it has finished (one stream of collectives, in bucket order, as
//   the reducer issues them). A bucket's collective is a ring:
//     all-reduce       2(P-1) hops of latency + 2(P-1)/P x bytes / busbw
//     reduce-scatter    (P-1) hops of latency +  (P-1)/P x bytes / busbw
//   (nccl-tests' bus bandwidth, so a comm_bench table is the link's own
//   description). Across nodes the ring's slowest hop sets both terms.
//   Every rank's step waits for the slowest rank: N ranks add the expected
//   maximum of N normal draws (compute_sd_s) to compute; where the profile
//   has each rank's own step (rank_step_s, ranks measured at once), the
//   draws are around those, and the expected maximum's excess over their
//   mean is added. Exposed
//   communication is what is left after backward; without overlap
//   every collective waits for backward to finish. ZeRO reduce-scatters the
//   buckets and all-gathers the updated parameters under the next forward,
//   exposing only what the forward cannot hide.
//
// Two cases, and the model says which it is in:
//   - GPUs: collectives run on copy engines and NCCL's own kernels beside
//     compute; compute is not slowed (shares_compute false).
//   - CPU ranks: MPI (and the kernel, over TCP) moves and sums the bytes on
//     the cores that compute, so each slows the other while bytes move:
//     compute by compute_slowdown, the collective by comm_slowdown; and a
//     collective started beside compute first waits a fixed cost; all
//     measured by running the two at once (ddp_train --contention-probe).
//     What is validated on CPU ranks carries over to GPUs only in the parts
//     that do not depend on this: bucket timing, the ring's terms, overlap.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "runtime/status.h"

namespace ddp {

struct ParamTiming {
  std::string name;
  int64_t bytes = 0;     // of the gradient as the rank holds it
  double ready_s = 0.0;  // after the (last) backward began
};

struct StepProfile {
  std::string model, device, path;
  // GPU ranks: NCCL's peer-to-peer on the profiled node (launch/peer_access.h:
  // "usable", "disabled", "user setting", "not applicable"), or "".
  std::string peer_access;
  int world_size = 1, threads = 0;
  int64_t samples_per_step = 0, accumulation_steps = 1;
  int64_t timed_steps = 0;  // the steps the medians are over
  double step_s = 0.0, forward_s = 0.0, backward_s = 0.0, last_backward_s = 0.0, other_s = 0.0;
  double compute_sd_s = 0.0;  // forward + backward's (robust) standard deviation over steps
  std::vector<ParamTiming> params;  // backward order
  // Profiles of a job's ranks measured at once (CombineRankProfiles): each
  // rank's step. A synchronous step waits for the slowest, and a rank that
  // is slower throughout (a busier core) is not step-to-step spread.
  std::vector<double> rank_step_s;
  int64_t gradient_bytes() const;
};

// Parses what --profile-file wrote; `path` names it in errors.
StatusOr<StepProfile> ParseStepProfile(const std::string& text, const std::string& path);
StatusOr<StepProfile> ReadStepProfile(const std::string& path);
// The file's JSON (what ParseStepProfile reads); a writer may add keys of
// its own (precision, batch size...), which readers ignore.
nlohmann::ordered_json StepProfileJson(const StepProfile& profile);
// The mean of profiles of the same model and layout (several ranks, or runs
// at different times): times, spreads and each gradient's ready time
// averaged. Refused when the gradients differ (names, bytes or order).
StatusOr<StepProfile> AverageProfiles(const std::vector<StepProfile>& profiles);
// The profiles of a job's ranks, one each, measured at the same time: their
// mean, with each rank's step kept in rank_step_s.
StatusOr<StepProfile> CombineRankProfiles(const std::vector<StepProfile>& profiles);

struct Link {
  std::string name;
  double bus_gbps = 0.0;    // GB/s (1e9 bytes) of ring bus bandwidth per rank
  double latency_us = 0.0;  // per ring hop, software included
  bool shares_compute = false;
  // CPU ranks: while a collective moves bytes beside compute, compute runs
  // 1/(1+s) as fast and the collective 1/(1+c) (the kernel's TCP work and
  // MPI's copies and sums share the cores).
  double compute_slowdown = 0.0, comm_slowdown = 0.0;
  std::string source;       // where the figures come from
  std::string assumes;      // what the figures take for granted
  // CPU ranks: each collective that starts while compute runs first waits
  // comm_per_collective_ms (on a 2-core box 10-15 ms whatever the size: its
  // thread waiting for its turn on the rank's core, as we read it), compute
  // running at full speed meanwhile, and costs compute
  // compute_per_collective_ms of work; a fixed cost a collective, which
  // the slowdowns alone, measured at one size, would spread over its bytes.
  // Many small buckets pay it often, but slow compute less than few large
  // ones: they move bytes for less of the backward.
  double compute_per_collective_ms = 0.0, comm_per_collective_ms = 0.0;
};

// Presets, each with its source: pcie4-host-bounce and pcie4-host-bounce-x4
// (two and four RTX 4090s, no peer access), pcie4-p2p (PCIe GPUs whose peer
// access works), nvlink-bridge, 25gbe, ib-100, and cpu-shm (CPU ranks on one box,
// Open MPI's shared memory).
const std::vector<Link>& LinkPresets();
// The preset for a node like the profiled one (--link auto): cpu-shm for
// CPU ranks; for GPUs, pcie4-p2p where peer access was found usable, else
// pcie4-host-bounce. With the reason, for the tool's line.
std::pair<std::string, std::string> AutoLinkPreset(const StepProfile& profile);
// A preset's name, or the path of a link file: `key = value` lines (name,
// bus_gbps, latency_us, shares_compute, compute_slowdown, comm_slowdown,
// compute_per_collective_ms, comm_per_collective_ms, source, assumes;
// `#` starts a comment). Errors name the file and line.
StatusOr<Link> LoadLink(const std::string& name_or_path);
StatusOr<Link> ParseLinkFile(const std::string& text, const std::string& path);
std::string LinkFileText(const Link& link);

// A link fitted to measured all-reduce times at `ranks` ranks: least squares
// on t = a + b x bytes, weighted by 1/t^2 (relative errors), then latency =
// a / 2(P-1), busbw = 2(P-1)/P / b.
StatusOr<Link> FitLink(const std::vector<std::pair<int64_t, double>>& bytes_seconds, int ranks,
                       const std::string& name);

// CPU ranks' contention, from backward timed alone and beside collectives
// run back to back (comm/contention_probe.h, --bucket-mb auto's pass) at
// one or two sizes. A load of one size: backward beside it, how many
// collectives started during that backward, and one collective's time
// alone and beside backward.
struct ContentionLoad {
  int64_t bytes = 0;
  double backward_s = 0.0, collectives = 0.0, collective_quiet_s = 0.0, collective_loaded_s = 0.0;
};
struct Contention {
  double compute_slowdown = 0.0, comm_slowdown = 0.0;
  double compute_per_collective_s = 0.0, comm_per_collective_s = 0.0;
};
// With one load, the slowdowns are its ratios (no fixed cost). With two of
// different sizes (more collectives in the smaller one's backward), two
// equations each: loaded collective = its quiet time x (1 + c) + fixed
// (y); and, as Predict simulates it (compute slowed only while bytes move,
// B = loaded backward - collectives x y of it), loaded backward = quiet +
// collectives x fixed + B x s / (1 + s). A fixed cost solved below zero
// is taken as zero and the slowdown is the larger load's; a slowdown
// below zero is zero, and the fixed cost the larger load's excess over
// its collectives (compute) or the loads' mean excess (a collective);
// compute's slowdown is at most +1900%. The fixed cost is fitted only
// where the two are far enough apart to tell it from noise: one more
// collective in the smaller load's backward (compute), quiet times
// twofold apart (a collective; otherwise both are mostly latency, and the
// mean excess is all fixed).
Contention FitContention(double backward_quiet_s, const ContentionLoad& large, const ContentionLoad* small);
// The smaller of the two loads, for a larger one of `bytes`: a quarter of
// it, in whole float32 elements (--contention-probe and --bucket-mb auto's
// contention pass both load these two sizes).
inline int64_t SmallerContentionLoad(int64_t bytes) { return bytes / 16 * 4; }
// FitContention over what a --contention-probe file timed (format 2: its
// backward alone and its one or two loads), so
// the model's current fit, not the one the probe printed, sets a link's
// contention. `path` names the file in errors.
StatusOr<Contention> FitContentionProbe(const std::string& text, const std::string& path);

struct ClusterShape {
  int gpus_per_node = 1, nodes = 1;
  Link intra, inter;  // inter is used when nodes > 1
  int ranks() const { return gpus_per_node * nodes; }
};

struct PredictOptions {
  double bucket_mb = 25.0, first_bucket_mb = 1.0;
  bool overlap = true;
  int zero_stage = 0;
  double wire_scale = 1.0;     // bytes on the wire per gradient byte (0.5: fp16 gradients of an fp32 profile)
  double compute_scale = 1.0;  // the profile's compute times, scaled (another device)
};

struct BucketPrediction {
  int64_t bytes = 0;  // on the wire
  double ready_s = 0.0, start_s = 0.0, end_s = 0.0;  // after backward began
};

struct Prediction {
  int ranks = 1;
  double step_s = 0.0;       // wall time of one step
  double compute_s = 0.0;    // forward + backward + other, as profiled (scaled)
  double comm_s = 0.0;       // the collectives' own time, summed
  double exposed_s = 0.0;    // the step's time beyond compute
  double straggler_s = 0.0;  // waiting for the slowest rank's compute
  double samples_per_s = 0.0;  // the whole job's
  double efficiency = 1.0;   // samples_per_s / (ranks x one rank's)
  std::vector<BucketPrediction> buckets;
};

double AllReduceSeconds(int64_t bytes, const ClusterShape& shape);
double ReduceScatterSeconds(int64_t bytes, const ClusterShape& shape);  // and all-gather

Prediction Predict(const StepProfile& profile, const ClusterShape& shape, const PredictOptions& options);

// Which case a shape is modelled as, in one line.
std::string DescribeCase(const ClusterShape& shape);

}  // namespace ddp
