#include "comm/scaling_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include "comm/buckets.h"
#include "nlohmann/json.hpp"
#include "runtime/durable_files.h"

namespace ddp {

int64_t StepProfile::gradient_bytes() const {
  int64_t total = 0;
  for (const ParamTiming& p : params) total += p.bytes;
  return total;
}

StatusOr<StepProfile> ParseStepProfile(const std::string& text, const std::string& path) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("step profile " + path + ": not a JSON object");
  if (j.value("format", "") != "ddp_train step profile 1") {
    return InvalidArgument("step profile " + path + ": not written by ddp_train --profile-file (no 'format')");
  }
  StepProfile p;
  p.path = path;
  try {
    p.model = j.at("model").get<std::string>();
    p.device = j.at("device").get<std::string>();
    p.peer_access = j.value("peer_access", "");
    p.world_size = j.at("world_size").get<int>();
    p.threads = j.at("threads").get<int>();
    p.samples_per_step = j.at("samples_per_step").get<int64_t>();
    p.accumulation_steps = j.at("accumulation_steps").get<int64_t>();
    p.timed_steps = j.value("timed_steps", int64_t{0});
    p.step_s = j.at("step_s").get<double>();
    p.forward_s = j.at("forward_s").get<double>();
    p.backward_s = j.at("backward_s").get<double>();
    p.last_backward_s = j.at("last_backward_s").get<double>();
    p.other_s = j.at("other_s").get<double>();
    p.compute_sd_s = j.value("compute_sd_s", 0.0);
    for (const auto& e : j.at("params")) {
      p.params.push_back({e.at("name").get<std::string>(), e.at("bytes").get<int64_t>(), e.at("ready_s").get<double>()});
    }
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument("step profile " + path + ": " + e.what());
  }
  if (p.params.empty() || p.step_s <= 0.0 || p.samples_per_step <= 0) {
    return InvalidArgument("step profile " + path + ": no parameters or no timed step");
  }
  return p;
}

StatusOr<StepProfile> ReadStepProfile(const std::string& path) {
  StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return Status(text.status().code(), "step profile " + path + ": " + text.status().message());
  return ParseStepProfile(*text, path);
}

nlohmann::ordered_json StepProfileJson(const StepProfile& p) {
  nlohmann::ordered_json out = {{"format", "ddp_train step profile 1"},
                                {"model", p.model},
                                {"device", p.device},
                                {"peer_access", p.peer_access},
                                {"world_size", p.world_size},
                                {"threads", p.threads},
                                {"accumulation_steps", p.accumulation_steps},
                                {"samples_per_step", p.samples_per_step},
                                {"timed_steps", p.timed_steps},
                                {"step_s", p.step_s},
                                {"forward_s", p.forward_s},
                                {"backward_s", p.backward_s},
                                {"last_backward_s", p.last_backward_s},
                                {"other_s", p.other_s},
                                {"compute_sd_s", p.compute_sd_s}};
  nlohmann::ordered_json params = nlohmann::ordered_json::array();
  for (const ParamTiming& t : p.params) params.push_back({{"name", t.name}, {"bytes", t.bytes}, {"ready_s", t.ready_s}});
  out["params"] = params;
  return out;
}

StatusOr<StepProfile> AverageProfiles(const std::vector<StepProfile>& profiles) {
  if (profiles.empty()) return InvalidArgument("no step profiles to average");
  StepProfile mean = profiles[0];
  const double n = static_cast<double>(profiles.size());
  for (size_t i = 1; i < profiles.size(); ++i) {
    const StepProfile& p = profiles[i];
    bool same = p.params.size() == mean.params.size() && p.samples_per_step == mean.samples_per_step &&
                p.world_size == mean.world_size;
    for (size_t k = 0; same && k < p.params.size(); ++k) {
      same = p.params[k].name == mean.params[k].name && p.params[k].bytes == mean.params[k].bytes;
    }
    if (!same) {
      return InvalidArgument("step profiles " + profiles[0].path + " and " + p.path +
                             " differ in their gradients or batch: only profiles of one configuration average");
    }
    mean.path += "," + p.path;
  }
  for (double StepProfile::*field : {&StepProfile::step_s, &StepProfile::forward_s, &StepProfile::backward_s,
                                     &StepProfile::last_backward_s, &StepProfile::other_s, &StepProfile::compute_sd_s}) {
    double sum = 0.0;
    for (const StepProfile& p : profiles) sum += p.*field;
    mean.*field = sum / n;
  }
  for (size_t k = 0; k < mean.params.size(); ++k) {
    double sum = 0.0;
    for (const StepProfile& p : profiles) sum += p.params[k].ready_s;
    mean.params[k].ready_s = sum / n;
  }
  return mean;
}

StatusOr<StepProfile> CombineRankProfiles(const std::vector<StepProfile>& profiles) {
  ASSIGN_OR_RETURN(StepProfile mean, AverageProfiles(profiles));
  mean.rank_step_s.clear();
  for (const StepProfile& p : profiles) mean.rank_step_s.push_back(p.step_s);
  return mean;
}

const std::vector<Link>& LinkPresets() {
  static const std::vector<Link> presets = {
      {"pcie4-host-bounce", 12.0, 10.0, false, 0.0, 0.0,
       "PCIe 4.0 x16: 16 GT/s x 16 lanes x 128/130 = 31.5 GB/s per direction (PCI-SIG, PCIe 4.0 base "
       "specification); pinned copies reach about 24-26 GB/s (CUDA's bandwidthTest on such hosts); published "
       "2x RTX 4090 runs (server-gear.com, tf_cnn_benchmarks ResNet-50 fp16, batch 64-512) lose 7.9-9.6 ms a "
       "step to their 102 MB of fp32 gradients, 12.0 GB/s",
       "RTX 4090s have no peer access: NCCL stages every hop through host memory, each byte crossing PCIe "
       "twice in series (device to host, host to device), so 24 GB/s / 2 = 12 GB/s of bus bandwidth per GPU "
       "while two GPUs exchange; about 10 us per hop (a host-memory handshake). Four GPUs staging at once share "
       "the host's root complex and memory: see pcie4-host-bounce-x4"},
      {"pcie4-host-bounce-x4", 7.3, 10.0, false, 0.0, 0.0,
       "fitted to published 4x RTX 4090 runs (server-gear.com, tf_cnn_benchmarks ResNet-50 fp16 on 2x EPYC "
       "7252, NGC TensorFlow 23.02): 19.1-22.6 ms lost a step at every batch from 64 to 512, what a ring "
       "all-reduce of the 102 MB of fp32 gradients takes at 7.3 GB/s",
       "four RTX 4090s without peer access, every hop staged through host memory at once: each GPU's share of "
       "the host bounce falls from 12 to 7.3 GB/s (a dual-socket server, whose GPUs' staging also crosses "
       "the sockets' link; a one-socket workstation may keep more)"},
      {"pcie4-p2p", 24.0, 5.0, false, 0.0, 0.0,
       "PCIe 4.0 x16: 31.5 GB/s per direction (PCI-SIG); direct copies reach about 24-26 GB/s (CUDA's "
       "bandwidthTest on such hosts, as for pcie4-host-bounce)",
       "GPUs whose peer access works (data-centre and workstation PCIe cards; launch/peer_access.h verifies it): "
       "NCCL writes straight into the peer's memory, each byte crossing PCIe once, so the copy rate is the bus "
       "bandwidth; about 5 us per hop (no host-memory handshake). Derived from the copy rate, not measured with "
       "NCCL here"},
      {"nvlink-bridge", 50.0, 3.0, false, 0.0, 0.0,
       "NVIDIA's RTX 3090 / RTX A6000 NVLink bridge: 112.5 GB/s both directions, 56.25 GB/s each way",
       "about 90% of the bridge's rate as bus bandwidth, every ring hop on NVLink (a bridge joins two GPUs: "
       "four GPUs need two bridges and a ring that crosses PCIe between the pairs, which this preset leaves out)"},
      {"25gbe", 2.9, 25.0, false, 0.0, 0.0,
       "IEEE 802.3by 25GBASE: 25 Gbit/s = 3.125 GB/s line rate",
       "about 93% of the line rate after Ethernet, IP and TCP headers (NCCL's socket transport), one NIC per "
       "node carrying the ring's one inter-node hop each way; about 25 us per hop through the kernel's TCP stack"},
      {"ib-100", 11.5, 6.0, false, 0.0, 0.0,
       "InfiniBand EDR / HDR100 (IBTA): 100 Gbit/s = 12.5 GB/s line rate; nccl-tests over one such HCA report "
       "about 11-12 GB/s of bus bandwidth",
       "GPUDirect RDMA or a host bounce that keeps up with the HCA, one HCA per node; about 6 us per hop"},
      {"cpu-shm", 2.0, 20.0, true, 0.25, 0.5,
       "this project's comm_bench on 2 CPU ranks of a 2-core box (docs/comm_bench.md: 64 MiB all-reduce at 2.28 GB/s "
       "bus bandwidth; small messages about 20 us a hop)",
       "CPU ranks on one box, Open MPI's shared memory: the cores that compute also copy and sum, so compute "
       "slows while a collective is in flight (compute_slowdown, measured by tools/scaling/scaling_validation)"},
  };
  return presets;
}

std::pair<std::string, std::string> AutoLinkPreset(const StepProfile& profile) {
  if (profile.device.rfind("cuda", 0) != 0) return {"cpu-shm", "the profile's ranks ran on the CPU"};
  if (profile.peer_access == "usable") return {"pcie4-p2p", "the profiled node's GPUs have working peer access"};
  if (profile.peer_access.empty()) {
    return {"pcie4-host-bounce", "the profile does not say whether peer access works: assumed not (GeForce cards)"};
  }
  return {"pcie4-host-bounce", "the profiled node's peer access: " + profile.peer_access};
}

namespace {

std::string Trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
}

bool ParseNumber(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(*out);
}

}  // namespace

StatusOr<Link> ParseLinkFile(const std::string& text, const std::string& path) {
  Link link;
  link.name = path;
  bool have_bw = false, have_latency = false;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string where = "link file " + path + " line " + std::to_string(number);
    const size_t hash = line.find('#');
    const std::string body = Trim(hash == std::string::npos ? line : line.substr(0, hash));
    if (body.empty()) continue;
    const size_t eq = body.find('=');
    if (eq == std::string::npos) return InvalidArgument(where + ": expected 'key = value', got '" + body + "'");
    const std::string key = Trim(body.substr(0, eq)), value = Trim(body.substr(eq + 1));
    double number_value = 0.0;
    if (key == "name" || key == "source" || key == "assumes") {
      (key == "name" ? link.name : key == "source" ? link.source : link.assumes) = value;
    } else if (key == "bus_gbps" || key == "latency_us" || key == "compute_slowdown" || key == "comm_slowdown" ||
               key == "compute_per_collective_ms" || key == "comm_per_collective_ms") {
      if (!ParseNumber(value, &number_value) || number_value < 0.0 || (key == "bus_gbps" && number_value == 0.0)) {
        return InvalidArgument(where + ": " + key + " must be a " + (key == "bus_gbps" ? "positive" : "non-negative") +
                               " number, got '" + value + "'");
      }
      if (key == "bus_gbps") link.bus_gbps = number_value, have_bw = true;
      if (key == "latency_us") link.latency_us = number_value, have_latency = true;
      if (key == "compute_slowdown") link.compute_slowdown = number_value;
      if (key == "comm_slowdown") link.comm_slowdown = number_value;
      if (key == "compute_per_collective_ms") link.compute_per_collective_ms = number_value;
      if (key == "comm_per_collective_ms") link.comm_per_collective_ms = number_value;
    } else if (key == "shares_compute") {
      if (value != "true" && value != "false") {
        return InvalidArgument(where + ": shares_compute must be true or false, got '" + value + "'");
      }
      link.shares_compute = value == "true";
    } else {
      return InvalidArgument(where + ": unknown key '" + key +
                             "' (bus_gbps, latency_us, shares_compute, compute_slowdown, comm_slowdown, "
                             "compute_per_collective_ms, comm_per_collective_ms, name, source, assumes)");
    }
  }
  if (!have_bw || !have_latency) {
    return InvalidArgument("link file " + path + ": needs bus_gbps and latency_us");
  }
  return link;
}

std::string LinkFileText(const Link& link) {
  char numbers[400];
  std::snprintf(numbers, sizeof(numbers),
                "bus_gbps = %.6g\nlatency_us = %.6g\nshares_compute = %s\ncompute_slowdown = %.6g\ncomm_slowdown = %.6g\n"
                "compute_per_collective_ms = %.6g\ncomm_per_collective_ms = %.6g\n",
                link.bus_gbps, link.latency_us, link.shares_compute ? "true" : "false", link.compute_slowdown,
                link.comm_slowdown, link.compute_per_collective_ms, link.comm_per_collective_ms);
  std::string text = "name = " + link.name + "\n" + numbers;
  if (!link.source.empty()) text += "source = " + link.source + "\n";
  if (!link.assumes.empty()) text += "assumes = " + link.assumes + "\n";
  return text;
}

StatusOr<Link> LoadLink(const std::string& name_or_path) {
  for (const Link& preset : LinkPresets()) {
    if (preset.name == name_or_path) return preset;
  }
  if (!PathExists(name_or_path)) {
    std::string names;
    for (const Link& preset : LinkPresets()) names += (names.empty() ? "" : ", ") + preset.name;
    return InvalidArgument("link '" + name_or_path + "' is neither a preset (" + names + ") nor a file");
  }
  StatusOr<std::string> text = ReadWholeFile(name_or_path);
  if (!text.ok()) return Status(text.status().code(), "link file " + name_or_path + ": " + text.status().message());
  return ParseLinkFile(*text, name_or_path);
}

Contention FitContention(double backward_quiet_s, const ContentionLoad& large, const ContentionLoad* small) {
  Contention out;
  if (!(backward_quiet_s > 0.0) || !(large.collective_quiet_s > 0.0)) return out;  // nothing timed
  // A collective: loaded = quiet x (1 + c) + fixed. Where the quiet times
  // grow less than twofold from the smaller size to the larger (mostly
  // latency, and the slope between two close points is noise) or the slope
  // is below one, the loaded ones' excess is a fixed cost: their mean
  // excess.
  const double tq = large.collective_quiet_s, t = large.collective_loaded_s;
  double excess = t - tq;
  if (small != nullptr) excess = (excess + small->collective_loaded_s - small->collective_quiet_s) / 2.0;
  if (small != nullptr && tq < 2.0 * small->collective_quiet_s) {
    out.comm_per_collective_s = std::max(0.0, excess);
  } else {
    double slope = t / tq;
    if (small != nullptr) {
      slope = (t - small->collective_loaded_s) / (tq - small->collective_quiet_s);
      out.comm_per_collective_s = t - tq * slope;
      if (out.comm_per_collective_s < 0.0) out.comm_per_collective_s = 0.0, slope = t / tq;
    }
    out.comm_slowdown = slope - 1.0;
    if (out.comm_slowdown < 0.0) out.comm_slowdown = 0.0, out.comm_per_collective_s = std::max(0.0, excess);
  }
  // Compute, beside collectives run back to back: slowed only while bytes
  // move, not in each collective's fixed cost, so of a loaded backward T
  // with n collectives started in it, T - n x fixed moved bytes (B). Work
  // done: quiet = (T - B) + B / (1 + s) - n x compute's fixed cost, so
  // T = quiet + n x fixed + B x sigma, sigma = s / (1 + s), linear in the
  // two unknowns; two sizes solve it.
  const double bq = backward_quiet_s, y = out.comm_per_collective_s;
  auto moving = [&](const ContentionLoad& l) {
    return std::clamp(l.backward_s - l.collectives * y, 0.0, l.backward_s);
  };
  const double max_sigma = 0.95;  // compute at 1/20 of its speed at most
  double fixed = 0.0, sigma = 0.0;
  const double bl = moving(large), el = large.backward_s - bq;
  auto sigma_alone = [&]() {  // no fixed cost: the larger load's excess over its moving time
    return bl > 0.0 ? el / bl : 0.0;
  };
  sigma = sigma_alone();
  if (small != nullptr && small->collectives >= large.collectives + 1.0) {
    const double bs = moving(*small), es = small->backward_s - bq;
    const double det = large.collectives * bs - small->collectives * bl;
    if (det != 0.0) {
      fixed = (el * bs - es * bl) / det;
      sigma = (large.collectives * es - small->collectives * el) / det;
    }
    if (fixed < 0.0) fixed = 0.0, sigma = sigma_alone();
  }
  if (sigma < 0.0 || bl <= 0.0) {
    sigma = 0.0;
    fixed = large.collectives > 0.0 ? std::max(0.0, el / large.collectives) : 0.0;
  } else if (sigma > max_sigma) {
    sigma = max_sigma;
    fixed = large.collectives > 0.0 ? std::max(0.0, (el - bl * sigma) / large.collectives) : 0.0;
  }
  out.compute_slowdown = sigma / (1.0 - sigma);
  out.compute_per_collective_s = fixed;
  return out;
}

StatusOr<Contention> FitContentionProbe(const std::string& text, const std::string& path) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || j.value("format", "") != "ddp_train contention probe 2") {
    return InvalidArgument("contention probe " + path +
                           ": not written by ddp_train --contention-probe (format 'ddp_train contention probe 2')");
  }
  ContentionLoad large, small;
  double quiet = 0.0;
  try {
    quiet = j.at("compute_quiet_s").get<double>();
    for (auto [key, load] : {std::pair<const char*, ContentionLoad*>{"large", &large}, {"small", &small}}) {
      if (load == &small && !j.contains("small")) break;  // one size probed
      const nlohmann::json& l = j.at(key);
      *load = ContentionLoad{l.at("bytes").get<int64_t>(), l.at("backward_s").get<double>(),
                             l.at("collectives_per_backward").get<double>(), l.at("collective_quiet_s").get<double>(),
                             l.at("collective_loaded_s").get<double>()};
    }
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument("contention probe " + path + ": " + e.what());
  }
  return FitContention(quiet, large, small.bytes > 0 ? &small : nullptr);
}

StatusOr<Link> FitLink(const std::vector<std::pair<int64_t, double>>& bytes_seconds, int ranks,
                       const std::string& name) {
  if (ranks < 2 || bytes_seconds.size() < 2) return InvalidArgument("a link fit needs 2 ranks and 2 sizes at least");
  // Weighted by 1/t^2: relative errors count, so the small sizes that
  // show the latency weigh as much as the large ones that show bandwidth.
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [bytes, seconds] : bytes_seconds) {
    if (!(seconds > 0.0)) return InvalidArgument("a link fit needs positive times");
    const double x = static_cast<double>(bytes), w = 1.0 / (seconds * seconds);
    n += w, sx += w * x, sy += w * seconds, sxx += w * x * x, sxy += w * x * seconds;
  }
  const double denominator = n * sxx - sx * sx;
  if (denominator <= 0.0) return InvalidArgument("a link fit needs two different sizes");
  const double b = (n * sxy - sx * sy) / denominator;
  const double a = (sy - b * sx) / n;
  if (b <= 0.0) return InvalidArgument("the measured times do not grow with size: no bandwidth to fit");
  Link link;
  link.name = name;
  const double hops = 2.0 * (ranks - 1);
  link.bus_gbps = hops / ranks / b / 1e9;
  link.latency_us = std::max(0.0, a) / hops * 1e6;
  link.source = "fitted to measured all-reduce times at " + std::to_string(ranks) + " ranks";
  return link;
}

namespace {

struct Ring {
  double latency_s, bytes_per_s;
};

Ring RingOf(const ClusterShape& shape) {
  Ring ring{shape.intra.latency_us * 1e-6, shape.intra.bus_gbps * 1e9};
  if (shape.nodes > 1) {
    ring.latency_s = std::max(ring.latency_s, shape.inter.latency_us * 1e-6);
    ring.bytes_per_s = std::min(ring.bytes_per_s, shape.inter.bus_gbps * 1e9);
  }
  return ring;
}

bool SharesCompute(const ClusterShape& shape) {
  return shape.intra.shares_compute || (shape.nodes > 1 && shape.inter.shares_compute);
}

// Compute's and communication's slowdowns while both run, and each
// collective's fixed cost to both.
Contention ContentionOf(const ClusterShape& shape) {
  Contention out;
  if (!SharesCompute(shape)) return out;
  const bool inter = shape.nodes > 1;
  auto worst = [&](double Link::*field) { return std::max(shape.intra.*field, inter ? shape.inter.*field : 0.0); };
  out.compute_slowdown = worst(&Link::compute_slowdown);
  out.comm_slowdown = worst(&Link::comm_slowdown);
  out.compute_per_collective_s = worst(&Link::compute_per_collective_ms) * 1e-3;
  out.comm_per_collective_s = worst(&Link::comm_per_collective_ms) * 1e-3;
  return out;
}

// E[max_r (means[r] + sd x Z_r)] - mean(means), Z_r independent standard
// normals: by integrating 1 - F(x) above the lowest mean, F(x) = prod_r
// Phi((x - means[r]) / sd), ranks of equal means one factor Phi^count (P
// equal means, sd 1: the expected maximum of P standard normals). With sd
// 0, the largest mean's excess; one rank waits for none.
double ExpectedMaxExcess(const std::vector<double>& means, double sd) {
  if (means.size() <= 1) return 0.0;
  std::map<double, int> counts;
  for (double m : means) ++counts[m];
  double lo = means[0], hi = means[0], mean = 0.0;
  for (double m : means) lo = std::min(lo, m), hi = std::max(hi, m), mean += m;
  mean /= static_cast<double>(means.size());
  if (!(sd > 0.0)) return hi - mean;
  // E[X] = a + integral over [a, inf) of (1 - F) - integral below a of F,
  // a = lo - 8 sd (below it F is negligible).
  const double a = lo - 8.0 * sd, b = hi + 8.0 * sd;
  const int steps = 20000;
  const double h = (b - a) / steps;
  double integral = 0.0;
  for (int i = 0; i < steps; ++i) {
    const double x = a + (i + 0.5) * h;
    double cdf = 1.0;
    for (const auto& [m, count] : counts) cdf *= std::pow(0.5 * std::erfc(-(x - m) / (sd * std::sqrt(2.0))), count);
    integral += (1.0 - cdf) * h;
  }
  return a + integral - mean;
}

}  // namespace

double AllReduceSeconds(int64_t bytes, const ClusterShape& shape) {
  const int p = shape.ranks();
  if (p < 2) return 0.0;
  const Ring ring = RingOf(shape);
  return 2.0 * (p - 1) * ring.latency_s + 2.0 * (p - 1) / p * static_cast<double>(bytes) / ring.bytes_per_s;
}

double ReduceScatterSeconds(int64_t bytes, const ClusterShape& shape) {
  const int p = shape.ranks();
  if (p < 2) return 0.0;
  const Ring ring = RingOf(shape);
  return (p - 1) * ring.latency_s + static_cast<double>(p - 1) / p * static_cast<double>(bytes) / ring.bytes_per_s;
}

std::string DescribeCase(const ClusterShape& shape) {
  if (!SharesCompute(shape)) return "GPU ranks: collectives run beside compute, which they do not slow";
  const Contention k = ContentionOf(shape);
  char line[400];
  std::snprintf(line, sizeof(line),
                "CPU ranks: collectives and compute share the cores (while a collective moves bytes beside "
                "compute, compute %.0f%% slower, the collective %.0f%% slower; each collective started beside "
                "compute costs it %.1f ms and itself %.1f ms more, a wait in which compute runs at full speed)",
                100.0 * k.compute_slowdown, 100.0 * k.comm_slowdown, k.compute_per_collective_s * 1e3,
                k.comm_per_collective_s * 1e3);
  return line;
}

namespace {

// The reducer's buckets over the profile's parameters (its layout rule, in
// backward order; f32 gradients, slices of split parameters unaligned):
// each ready with its latest parameter, its bytes as on the wire.
std::vector<BucketPrediction> PredictedBuckets(const StepProfile& profile, const PredictOptions& options) {
  std::vector<BucketPrediction> buckets;
  std::vector<int64_t> numels;
  for (const ParamTiming& p : profile.params) numels.push_back(p.bytes / 4);
  for (const BucketSpan& span : PlanBucketSpans(numels, 4, {}, options.first_bucket_mb, options.bucket_mb, 1)) {
    BucketPrediction b;
    int64_t bytes = 0;
    for (size_t k = span.first; k < span.first + span.count; ++k) {
      bytes += profile.params[k].bytes;
      b.ready_s = std::max(b.ready_s, profile.params[k].ready_s * options.compute_scale);
    }
    if (span.split) bytes = (span.end - span.begin) * 4;
    b.bytes = static_cast<int64_t>(std::llround(static_cast<double>(bytes) * options.wire_scale));
    buckets.push_back(b);
  }
  return buckets;
}

// Backward and the collectives on one wall clock. On CPU ranks a
// collective that starts while compute runs first waits its fixed cost
// (its thread waiting for the core, as we read it), compute running at
// full speed meanwhile and set back by compute's own fixed cost; then,
// while it moves bytes beside compute, compute runs 1/(1+s) as fast and
// the collective 1/(1+c). Event by event: compute reaches the next
// bucket's ready point (or the end of backward), or the collective in
// flight ends its fixed cost or finishes. Sets each bucket's ready, start
// and end times, adds each collective's seconds to `comm_s`, and returns
// when compute finished backward.
double RunBackward(std::vector<BucketPrediction>& buckets, double last_backward, bool overlap, const Contention& k,
                   const std::function<double(int64_t)>& duration, double* comm_s) {
  const double s = k.compute_slowdown, c = k.comm_slowdown;
  double wall = 0.0, done = 0.0;  // done: backward's compute so far, in profiled seconds
  double backward_wall = last_backward;  // when compute finished backward
  size_t ready = 0, next_comm = 0;
  double left = 0.0;        // the collective in flight: profiled seconds of its bytes still to move
  double fixed_left = 0.0;  // and wall seconds of its fixed cost still to wait
  bool in_flight = false;
  const size_t n = buckets.size();
  auto ready_at = [&](size_t b) { return overlap ? buckets[b].ready_s : last_backward; };
  for (int guard = 0; guard < 6 * static_cast<int>(n) + 8; ++guard) {
    const bool computing = done < last_backward;
    while (ready < n && done >= ready_at(ready)) buckets[ready++].ready_s = wall;
    if (!in_flight && next_comm < ready) {
      BucketPrediction& b = buckets[next_comm];
      b.start_s = wall;
      left = duration(b.bytes);
      *comm_s += left;
      in_flight = true;
      fixed_left = 0.0;
      if (computing) {
        done -= k.compute_per_collective_s;
        fixed_left = k.comm_per_collective_s;
      }
    }
    if (!computing && !in_flight) break;
    const bool moving = in_flight && fixed_left <= 0.0;
    const double compute_rate = computing ? (moving ? 1.0 / (1.0 + s) : 1.0) : 0.0;
    const double comm_rate = moving ? (computing ? 1.0 / (1.0 + c) : 1.0) : 0.0;
    const double target = ready < n ? std::min(ready_at(ready), last_backward) : last_backward;
    double dt = std::numeric_limits<double>::infinity();
    if (computing) dt = std::min(dt, (target - done) / compute_rate);
    if (in_flight) dt = std::min(dt, moving ? left / comm_rate : fixed_left);
    wall += dt;
    if (computing) {
      done = (target - done) / compute_rate <= dt ? target : done + dt * compute_rate;
      if (done >= last_backward) backward_wall = wall;
    }
    if (in_flight && !moving) {
      fixed_left = fixed_left <= dt ? 0.0 : fixed_left - dt;
    } else if (in_flight) {
      left -= dt * comm_rate;
      if (left <= 1e-15) {
        buckets[next_comm++].end_s = wall;
        in_flight = false;
      }
    }
  }
  return backward_wall;
}

}  // namespace

Prediction Predict(const StepProfile& profile, const ClusterShape& shape, const PredictOptions& options) {
  const double scale = options.compute_scale;
  Prediction out;
  out.ranks = shape.ranks();
  const double one_rank_step = profile.step_s * scale;
  const double forward = profile.forward_s * scale, other = profile.other_s * scale;
  const double last_backward = profile.last_backward_s * scale;
  const double earlier_backward = std::max(0.0, profile.backward_s - profile.last_backward_s) * scale;
  out.compute_s = one_rank_step;
  const double per_rank_samples = static_cast<double>(profile.samples_per_step) / profile.world_size;
  if (out.ranks == 1) {
    out.step_s = one_rank_step;
    out.samples_per_s = per_rank_samples / out.step_s;
    return out;
  }
  out.buckets = PredictedBuckets(profile, options);
  const bool zero = options.zero_stage >= 1;
  auto duration = [&](int64_t bytes) {
    return zero ? ReduceScatterSeconds(bytes, shape) : AllReduceSeconds(bytes, shape);
  };
  const double backward_wall =
      RunBackward(out.buckets, last_backward, options.overlap, ContentionOf(shape), duration, &out.comm_s);
  const size_t n = out.buckets.size();
  const double comm_free = n > 0 ? out.buckets[n - 1].end_s : 0.0;
  double step = forward + earlier_backward + std::max(backward_wall, comm_free) + other;
  // The step's own small all-reduce (loss, agreements).
  step += AllReduceSeconds(72, shape);
  // Waiting for the slowest rank: the expected maximum of the ranks' steps,
  // each its own mean (profiles measured at once, one a rank) or the
  // profile's, plus the step-to-step spread.
  const bool measured_ranks = static_cast<int>(profile.rank_step_s.size()) == out.ranks;
  const std::vector<double> means = measured_ranks ? profile.rank_step_s : std::vector<double>(out.ranks, 0.0);
  out.straggler_s = ExpectedMaxExcess(means, profile.compute_sd_s) * scale;
  step += out.straggler_s;
  if (zero) {
    // The updated parameters' all-gather, under the next forward.
    const double reduce_link = out.comm_s;
    double gather = 0.0;
    for (const BucketPrediction& b : out.buckets) gather += ReduceScatterSeconds(b.bytes, shape);
    out.comm_s += gather;
    step += std::max(0.0, gather - forward);
    if (options.zero_stage == 3) {
      // Stage 3 gathers the parameters again for backward, on the link the
      // reduce-scatters use: hidden only where backward leaves it idle.
      const double idle = std::max(0.0, earlier_backward + last_backward - reduce_link);
      out.comm_s += gather;
      step += std::max(0.0, gather - idle);
    }
  }
  out.step_s = step;
  out.exposed_s = std::max(0.0, step - one_rank_step);
  out.samples_per_s = out.ranks * per_rank_samples / step;
  out.efficiency = one_rank_step / step;
  return out;
}

}  // namespace ddp
