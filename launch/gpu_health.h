// GPU health and topology, the pain points of consumer GPUs in a box:
//
// - PCIe links from sysfs (/sys/bus/pci/devices/<address>/current_link_*
//   and max_link_*): a card at x8 in an x16 slot is warned about at start;
//   a link's speed drops while the GPU idles, so speed is judged only under
//   load (during training);
// - peer-to-peer access between the node's GPUs (4090s have none: NCCL
//   then goes through host memory);
// - NVML, loaded at run time (dlopen of libnvidia-ml.so.1, no build-time
//   dependency), sampled every few seconds during training: SM clock,
//   temperature, power and the clocks-event ("throttle") reasons; throttling
//   is logged when it starts and when it ends, and summed for the summary.
//
// The logic takes its readings from interfaces, so tests feed it a fake
// sysfs tree and injected sensor readings.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/status.h"

namespace ddp {

struct PcieLink {
  std::string address;
  double speed_gts = 0.0, max_speed_gts = 0.0;  // GT/s per lane
  int width = 0, max_width = 0;                 // lanes
};
// PCIe generation of a per-lane rate: 2.5 GT/s -> 1, 5 -> 2, 8 -> 3, 16 -> 4,
// 32 -> 5, 64 -> 6; 0 when unknown.
int PcieGeneration(double gts);
// "gen 4 x16".
std::string DescribeLink(double gts, int width);

// The link of PCI device `address` ("0000:01:00.0"; an NVML-style 8-digit
// domain is accepted) under `sysfs` (normally "/sys").
StatusOr<PcieLink> ReadPcieLink(const std::string& sysfs, const std::string& address);
// At start: a narrower link than the card's maximum, or "" when none.
std::string LinkWidthWarning(const std::string& gpu, const PcieLink& link);
// Under load: a slower link than the card's maximum, or "".
std::string LinkSpeedWarning(const std::string& gpu, const PcieLink& link);

struct GpuReading {
  bool valid = false;
  unsigned sm_clock_mhz = 0, temperature_c = 0;
  double power_w = 0.0;
  uint64_t reasons = 0;  // NVML's clocks-event reason bits
};
// The reasons that slow a busy GPU down (power cap, thermal, hardware
// slowdowns, power brake), or 0.
uint64_t ThrottleReasons(uint64_t reasons);
// "hardware thermal slowdown, software power cap".
std::string DescribeThrottle(uint64_t reasons);

class GpuSensor {
 public:
  virtual ~GpuSensor() = default;
  virtual GpuReading Read() = 0;
};
// NVML for the GPU at `address`; null (with the reason in *why) when NVML
// or the device cannot be opened.
std::unique_ptr<GpuSensor> OpenNvmlSensor(const std::string& address, std::string* why);

// Follows readings over time: logs throttling as it starts and ends, and
// keeps what the summary reports.
class ThrottleTracker {
 public:
  explicit ThrottleTracker(std::string gpu) : gpu_(std::move(gpu)) {}
  // A reading at `now` (seconds); returns the lines to log ("" none).
  std::string Observe(const GpuReading& reading, double now);
  double throttled_seconds(double now) const;
  unsigned max_temperature_c() const { return max_temperature_; }
  unsigned min_sm_clock_mhz() const { return min_clock_; }
  double max_power_w() const { return max_power_; }
  int samples() const { return samples_; }

 private:
  std::string gpu_;
  uint64_t throttling_ = 0;  // the reasons while throttling, 0 otherwise
  double since_ = 0.0, total_ = 0.0;
  unsigned max_temperature_ = 0, min_clock_ = 0;
  double max_power_ = 0.0;
  int samples_ = 0;
};

// A thread that samples `sensor` (and the PCIe link's speed, through
// `read_link`) every `interval_s` and prints what the tracker and the
// link check say, each line prefixed with `prefix` ("ddp_train: rank 1: ").
class HealthMonitor {
 public:
  HealthMonitor(std::string gpu, std::string prefix, std::unique_ptr<GpuSensor> sensor,
                std::function<StatusOr<PcieLink>()> read_link, double interval_s);
  ~HealthMonitor();
  // Stops the thread (at the end of training).
  void Stop();
  // Stops, then records what was sampled into the summary's GPU-health
  // record: samples, seconds throttled, the hottest temperature, the lowest
  // SM clock and the highest power.
  void StopAndRecord(nlohmann::ordered_json* record);
  const ThrottleTracker& tracker() const { return tracker_; }
  double stopped_at() const { return stopped_at_; }

 private:
  void Run();
  std::string gpu_, prefix_;
  std::unique_ptr<GpuSensor> sensor_;
  std::function<StatusOr<PcieLink>()> read_link_;
  double interval_s_;
  ThrottleTracker tracker_;
  int slow_link_samples_ = 0;
  bool warned_speed_ = false;
  double stopped_at_ = 0.0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace ddp
