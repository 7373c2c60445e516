// Predicts data-parallel scaling from one rank's step profile and a link
// description (comm/scaling_model.h), or fits a link to comm_bench's table.
//
//   scaling_model --profile P.json --link pcie4-host-bounce --gpus 1,2,4,8 [--nodes 2 --inter 25gbe]
//                 [--bucket-mb 25,50] [--nooverlap] [--zero-stage 2] [--wire-scale 0.5] [--step-ms 200]
//   scaling_model --fit comm_bench.txt --fit-ranks 2 [--name mylink] > mylink.link
//   scaling_model --list-links
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "comm/scaling_model.h"
#include "gflags/gflags.h"
#include "runtime/durable_files.h"

DEFINE_string(profile, "",
              "a step profile written by ddp_train --profile-file, or several (comma-separated) of one "
              "configuration, averaged; A+B joins runs of one rank measured at different times (averaged first, "
              "with --profile-ranks)");
DEFINE_bool(profile_ranks, false,
            "the --profile files are one job's ranks, measured at the same time (one each): averaged, and a step "
            "waits for the slowest of them");
DEFINE_string(link, "auto",
              "the link between a node's ranks: a preset, a link file, or auto (from the profile: cpu-shm for CPU "
              "ranks, pcie4-p2p for GPUs whose peer access works, else pcie4-host-bounce)");
DEFINE_string(inter, "25gbe", "the link between nodes (with --nodes above 1): a preset or a link file");
DEFINE_string(gpus, "1,2,4,8", "ranks per node to predict, comma-separated");
DEFINE_int32(nodes, 1, "nodes");
DEFINE_string(bucket_mb, "25", "bucket sizes in MiB, comma-separated: one table each");
DEFINE_double(first_bucket_mb, 1.0, "the first bucket's size in MiB");
DEFINE_bool(overlap, true, "all-reduce buckets during backward; --nooverlap after it");
DEFINE_int32(zero_stage, 0, "ZeRO stage (1 and 2: reduce-scatter, then all-gather under the next forward; 3: all-gathered again under backward)");
DEFINE_double(wire_scale, 1.0, "bytes on the wire per profiled gradient byte (0.5: fp16 gradients of an fp32 profile)");
DEFINE_double(step_ms, 0.0, "one rank's step time to scale the profile's compute to (another device); 0: as profiled");
DEFINE_double(compute_sd_ms, -1.0,
              "forward + backward's step-to-step spread (ms) after scaling; -1: the profile's, scaled (a noisy CPU "
              "box's spread overstates a GPU's)");
DEFINE_int64(batch_size, 0, "samples per rank and step the throughput counts (the profiled batch scaled by --step-ms); 0: the profile's");
DEFINE_double(input_cap, 0.0, "samples/s one node's input pipeline delivers at most (JPEG decoding); 0: no cap");
DEFINE_double(heat_slowdown, 0.0,
              "compute this much slower with more than one GPU per node (clocks under a full chassis's heat), "
              "against the one-GPU step");
DEFINE_bool(csv, false, "print CSV rows instead of a table");
DEFINE_string(fit, "", "comm_bench output to fit a link to (its all-reduce rows of 64 KiB and more)");
DEFINE_int32(fit_ranks, 2, "the ranks the --fit table was measured at");
DEFINE_string(name, "fitted", "the fitted link's name");
DEFINE_double(fit_compute_slowdown, -1.0,
              "CPU ranks: compute's slowdown while a collective moves bytes, for the fitted link (0.25: 25% slower); "
              "-1: GPU ranks, collectives beside compute");
DEFINE_double(fit_comm_slowdown, 0.0, "CPU ranks: the collectives' slowdown while compute runs, for the fitted link");
DEFINE_double(fit_compute_per_collective_ms, 0.0,
              "CPU ranks: the compute each collective started beside it costs, for the fitted link");
DEFINE_double(fit_comm_per_collective_ms, 0.0,
              "CPU ranks: how long each collective started beside compute waits first (compute at full speed), "
              "for the fitted link");
DEFINE_string(fit_contention, "",
              "CPU ranks: a file from ddp_train --contention-probe; the fitted link takes its contention, fitted "
              "anew (instead of the --fit-*slowdown and --fit-*-per-collective-ms figures)");
DEFINE_bool(list_links, false, "print the presets with their sources and assumptions");

namespace ddp {
namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "scaling_model: %s\n", message.c_str());
  return 2;
}

StatusOr<std::vector<double>> ParseList(const std::string& flag, const std::string& text) {
  std::vector<double> values;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(v > 0.0)) {
      return InvalidArgument("--" + flag + " '" + text + "': '" + item + "' is not a positive number");
    }
    values.push_back(v);
  }
  if (values.empty()) return InvalidArgument("--" + flag + " is empty");
  return values;
}

int Fit() {
  StatusOr<std::string> text = ReadWholeFile(FLAGS_fit);
  if (!text.ok()) return Fail("--fit " + FLAGS_fit + ": " + text.status().message());
  std::vector<std::pair<int64_t, double>> points;
  std::istringstream in(*text);
  std::string line, section;
  while (std::getline(in, line)) {
    char name[64];
    if (std::sscanf(line.c_str(), "# %63s", name) == 1 && line.find("size (B)") == std::string::npos) section = name;
    long long bytes = 0, count = 0;
    double us = 0.0;
    if (section == "allreduce" && line[0] == ' ' && std::sscanf(line.c_str(), "%lld %lld %lf", &bytes, &count, &us) == 3 &&
        bytes >= 65536) {
      points.push_back({bytes, us * 1e-6});
    }
  }
  if (points.size() < 2) return Fail("--fit " + FLAGS_fit + ": fewer than two all-reduce rows of 64 KiB or more");
  StatusOr<Link> link = FitLink(points, FLAGS_fit_ranks, FLAGS_name);
  if (!link.ok()) return Fail("--fit " + FLAGS_fit + ": " + link.status().message());
  if (!FLAGS_fit_contention.empty()) {
    StatusOr<std::string> probe = ReadWholeFile(FLAGS_fit_contention);
    if (!probe.ok()) return Fail("--fit-contention " + FLAGS_fit_contention + ": " + probe.status().message());
    StatusOr<Contention> k = FitContentionProbe(*probe, FLAGS_fit_contention);
    if (!k.ok()) return Fail(k.status().message());
    link->shares_compute = true;
    link->compute_slowdown = k->compute_slowdown;
    link->comm_slowdown = k->comm_slowdown;
    link->compute_per_collective_ms = k->compute_per_collective_s * 1e3;
    link->comm_per_collective_ms = k->comm_per_collective_s * 1e3;
  } else if (FLAGS_fit_compute_slowdown >= 0.0) {
    link->shares_compute = true;
    link->compute_slowdown = FLAGS_fit_compute_slowdown;
    link->comm_slowdown = std::max(0.0, FLAGS_fit_comm_slowdown);
    link->compute_per_collective_ms = std::max(0.0, FLAGS_fit_compute_per_collective_ms);
    link->comm_per_collective_ms = std::max(0.0, FLAGS_fit_comm_per_collective_ms);
  }
  std::printf("%s", LinkFileText(*link).c_str());
  return 0;
}

int Main() {
  if (FLAGS_list_links) {
    for (const Link& l : LinkPresets()) {
      std::printf("%s: %.3g GB/s bus bandwidth, %.3g us per hop%s\n  source: %s\n  assumes: %s\n", l.name.c_str(),
                  l.bus_gbps, l.latency_us, l.shares_compute ? ", shares the compute cores" : "", l.source.c_str(),
                  l.assumes.c_str());
    }
    return 0;
  }
  if (!FLAGS_fit.empty()) return Fit();
  if (FLAGS_profile.empty()) return Fail("--profile is required (a file from ddp_train --profile-file)");
  std::vector<StepProfile> profiles;
  std::stringstream items(FLAGS_profile);
  for (std::string item; std::getline(items, item, ',');) {
    // A+B: runs of one rank (or configuration) at different times, averaged.
    std::vector<StepProfile> runs;
    std::stringstream paths(item);
    for (std::string path; std::getline(paths, path, '+');) {
      StatusOr<StepProfile> one = ReadStepProfile(path);
      if (!one.ok()) return Fail(one.status().message());
      runs.push_back(*std::move(one));
    }
    StatusOr<StepProfile> mean = AverageProfiles(runs);
    if (!mean.ok()) return Fail("--profile " + item + ": " + mean.status().message());
    profiles.push_back(*std::move(mean));
  }
  StatusOr<StepProfile> profile = FLAGS_profile_ranks ? CombineRankProfiles(profiles) : AverageProfiles(profiles);
  if (!profile.ok()) return Fail(profile.status().message());
  ClusterShape shape;
  std::string link_name = FLAGS_link, auto_why;
  if (link_name == "auto") std::tie(link_name, auto_why) = AutoLinkPreset(*profile);
  StatusOr<Link> intra = LoadLink(link_name);
  if (!intra.ok()) return Fail("--link: " + intra.status().message());
  shape.intra = *intra;
  if (FLAGS_nodes < 1) return Fail("--nodes must be at least 1, got " + std::to_string(FLAGS_nodes));
  shape.nodes = FLAGS_nodes;
  if (FLAGS_nodes > 1) {
    StatusOr<Link> inter = LoadLink(FLAGS_inter);
    if (!inter.ok()) return Fail("--inter: " + inter.status().message());
    shape.inter = *inter;
  }
  StatusOr<std::vector<double>> gpus = ParseList("gpus", FLAGS_gpus);
  if (!gpus.ok()) return Fail(gpus.status().message());
  StatusOr<std::vector<double>> buckets = ParseList("bucket-mb", FLAGS_bucket_mb);
  if (!buckets.ok()) return Fail(buckets.status().message());
  if (!(FLAGS_first_bucket_mb > 0.0)) return Fail("--first-bucket-mb must be positive");
  if (!(FLAGS_wire_scale > 0.0)) return Fail("--wire-scale must be positive");
  if (FLAGS_step_ms < 0.0) return Fail("--step-ms must be non-negative");
  if (FLAGS_zero_stage < 0 || FLAGS_zero_stage > 3) {
    return Fail("--zero-stage must be 0, 1, 2 or 3, got " + std::to_string(FLAGS_zero_stage));
  }
  if (FLAGS_input_cap < 0.0 || FLAGS_heat_slowdown < 0.0) return Fail("--input-cap and --heat-slowdown must be non-negative");
  PredictOptions options;
  options.first_bucket_mb = FLAGS_first_bucket_mb;
  options.overlap = FLAGS_overlap;
  options.zero_stage = FLAGS_zero_stage;
  options.wire_scale = FLAGS_wire_scale;
  options.compute_scale = FLAGS_step_ms > 0.0 ? FLAGS_step_ms * 1e-3 / profile->step_s : 1.0;
  if (FLAGS_compute_sd_ms >= 0.0) profile->compute_sd_s = FLAGS_compute_sd_ms * 1e-3 / options.compute_scale;
  if (FLAGS_batch_size < 0) return Fail("--batch-size must be positive");
  const double profiled_per_rank = static_cast<double>(profile->samples_per_step) / profile->world_size;
  const double per_rank = FLAGS_batch_size > 0 ? static_cast<double>(FLAGS_batch_size) : profiled_per_rank;
  if (FLAGS_csv) {
    if (!auto_why.empty()) std::fprintf(stderr, "scaling_model: --link auto: %s (%s)\n", link_name.c_str(), auto_why.c_str());
    std::printf("bucket_mb,gpus_per_node,nodes,ranks,step_ms,comm_ms,exposed_ms,samples_per_s,speedup,efficiency\n");
  } else {
    std::printf("# scaling_model: %s profile %s (%s, %d rank%s, %.0f samples per rank, step %.1f ms)%s\n",
                profile->model.c_str(), FLAGS_profile.c_str(), profile->device.c_str(), profile->world_size,
                profile->world_size == 1 ? "" : "s", per_rank, profile->step_s * 1e3,
                FLAGS_step_ms > 0.0 ? (", compute scaled to " + std::to_string(FLAGS_step_ms).substr(0, 6) + " ms").c_str()
                                    : "");
    std::printf("# link: %s (%.3g GB/s, %.3g us per hop)", shape.intra.name.c_str(), shape.intra.bus_gbps,
                shape.intra.latency_us);
    if (!auto_why.empty()) std::printf(" (--link auto: %s)", auto_why.c_str());
    if (shape.nodes > 1) {
      std::printf("; between nodes: %s (%.3g GB/s, %.3g us per hop)", shape.inter.name.c_str(), shape.inter.bus_gbps,
                  shape.inter.latency_us);
    }
    std::printf("\n# %s\n# gradients %.1f MB on the wire, %s, ZeRO %d\n", DescribeCase(shape).c_str(),
                profile->gradient_bytes() * FLAGS_wire_scale / 1e6, FLAGS_overlap ? "overlapped" : "not overlapped",
                FLAGS_zero_stage);
  }
  for (double mb : *buckets) {
    options.bucket_mb = mb;
    if (!FLAGS_csv) {
      std::printf("#\n# bucket %g MiB (first %g)\n# %5s %5s %5s %10s %10s %10s %12s %8s %10s\n", mb,
                  FLAGS_first_bucket_mb, "gpus", "nodes", "ranks", "step ms", "comm ms", "exposed", "samples/s",
                  "speedup", "efficiency");
    }
    const double one_step = profile->step_s * options.compute_scale;
    for (double g : *gpus) {
      shape.gpus_per_node = static_cast<int>(g);
      PredictOptions these = options;
      if (shape.gpus_per_node > 1) these.compute_scale *= 1.0 + FLAGS_heat_slowdown;
      Prediction p = Predict(*profile, shape, these);
      p.samples_per_s *= per_rank / profiled_per_rank;
      // Against one GPU, unheated, uncapped; then the input pipeline's cap.
      p.efficiency = one_step / p.step_s;
      if (FLAGS_input_cap > 0.0 && p.samples_per_s > FLAGS_input_cap * shape.nodes) {
        p.efficiency *= FLAGS_input_cap * shape.nodes / p.samples_per_s;
        p.samples_per_s = FLAGS_input_cap * shape.nodes;
      }
      const double speedup = p.ranks * p.efficiency;
      if (FLAGS_csv) {
        std::printf("%g,%d,%d,%d,%.4f,%.4f,%.4f,%.3f,%.4f,%.4f\n", mb, shape.gpus_per_node, shape.nodes, p.ranks,
                    p.step_s * 1e3, p.comm_s * 1e3, p.exposed_s * 1e3, p.samples_per_s, speedup, p.efficiency);
      } else {
        std::printf("  %5d %5d %5d %10.2f %10.2f %10.2f %12.1f %7.2fx %9.1f%%\n", shape.gpus_per_node, shape.nodes,
                    p.ranks, p.step_s * 1e3, p.comm_s * 1e3, p.exposed_s * 1e3, p.samples_per_s, speedup,
                    100.0 * p.efficiency);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace ddp

int main(int argc, char** argv) {
  gflags::SetUsageMessage("scaling_model --profile P.json --link pcie4-host-bounce --gpus 1,2,4,8");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (argc > 1) return ddp::Fail(std::string("unexpected argument '") + argv[1] + "'");
  return ddp::Main();
}
