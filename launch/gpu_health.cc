#include "launch/gpu_health.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "runtime/clock.h"

namespace ddp {
namespace {

// NVML's clocks-event reason bits (nvml.h).
constexpr uint64_t kGpuIdle = 0x1, kSwPowerCap = 0x4, kHwSlowdown = 0x8, kSwThermal = 0x20, kHwThermal = 0x40,
                   kHwPowerBrake = 0x80;

StatusOr<std::string> ReadLine(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(path + ": cannot read");
  std::string line;
  std::getline(in, line);
  return line;
}

// "16.0 GT/s PCIe", "8 GT/s", "2.5 GT/s" -> GT/s.
double ParseSpeed(const std::string& text) { return std::atof(text.c_str()); }

std::string Normalize(std::string address) {
  for (char& c : address) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // NVML's 8-digit domain ("00000000:01:00.0") as sysfs's 4.
  const size_t colon = address.find(':');
  if (colon == 8 && address.compare(0, 4, "0000") == 0) address = address.substr(4);
  return address;
}

}  // namespace

int PcieGeneration(double gts) {
  const double rates[] = {2.5, 5.0, 8.0, 16.0, 32.0, 64.0};
  for (int g = 0; g < 6; ++g) {
    if (std::fabs(gts - rates[g]) < 0.3) return g + 1;
  }
  return 0;
}

std::string DescribeLink(double gts, int width) {
  char text[64];
  const int gen = PcieGeneration(gts);
  if (gen > 0) {
    std::snprintf(text, sizeof(text), "gen %d x%d", gen, width);
  } else {
    std::snprintf(text, sizeof(text), "%.1f GT/s x%d", gts, width);
  }
  return text;
}

StatusOr<PcieLink> ReadPcieLink(const std::string& sysfs, const std::string& address) {
  PcieLink link;
  link.address = Normalize(address);
  const std::string dir = sysfs + "/bus/pci/devices/" + link.address + "/";
  ASSIGN_OR_RETURN(const std::string speed, ReadLine(dir + "current_link_speed"));
  ASSIGN_OR_RETURN(const std::string max_speed, ReadLine(dir + "max_link_speed"));
  ASSIGN_OR_RETURN(const std::string width, ReadLine(dir + "current_link_width"));
  ASSIGN_OR_RETURN(const std::string max_width, ReadLine(dir + "max_link_width"));
  link.speed_gts = ParseSpeed(speed);
  link.max_speed_gts = ParseSpeed(max_speed);
  link.width = std::atoi(width.c_str());
  link.max_width = std::atoi(max_width.c_str());
  if (link.width <= 0 || link.max_width <= 0 || link.speed_gts <= 0.0 || link.max_speed_gts <= 0.0) {
    return InvalidArgument(dir + ": unreadable link (speed '" + speed + "', width '" + width + "')");
  }
  return link;
}

std::string LinkWidthWarning(const std::string& gpu, const PcieLink& link) {
  if (link.width >= link.max_width) return "";
  char text[512];
  std::snprintf(text, sizeof(text),
                "%s (%s) runs its PCIe link at x%d, below the card's x%d: %.0f%% of the bandwidth for NCCL and host "
                "copies (a slot wired x%d, a riser, or a shared switch); an x%d slot gives it all",
                gpu.c_str(), link.address.c_str(), link.width, link.max_width,
                100.0 * link.width / link.max_width, link.width, link.max_width);
  return text;
}

std::string LinkSpeedWarning(const std::string& gpu, const PcieLink& link) {
  if (link.speed_gts >= link.max_speed_gts - 0.1) return "";
  char text[512];
  std::snprintf(text, sizeof(text),
                "%s (%s) runs its PCIe link at %s under load, below the card's %s: check the slot's generation, the "
                "BIOS PCIe setting or a riser",
                gpu.c_str(), link.address.c_str(), DescribeLink(link.speed_gts, link.width).c_str(),
                DescribeLink(link.max_speed_gts, link.max_width).c_str());
  return text;
}

uint64_t ThrottleReasons(uint64_t reasons) {
  return reasons & (kSwPowerCap | kHwSlowdown | kSwThermal | kHwThermal | kHwPowerBrake);
}

std::string DescribeThrottle(uint64_t reasons) {
  const std::pair<uint64_t, const char*> names[] = {{kHwThermal, "hardware thermal slowdown"},
                                                    {kSwThermal, "software thermal slowdown"},
                                                    {kHwPowerBrake, "hardware power brake"},
                                                    {kHwSlowdown, "hardware slowdown"},
                                                    {kSwPowerCap, "power cap"}};
  std::string out;
  for (const auto& [bit, name] : names) {
    if (reasons & bit) out += (out.empty() ? "" : ", ") + std::string(name);
  }
  return out;
}

std::string ThrottleTracker::Observe(const GpuReading& r, double now) {
  if (!r.valid) return "";
  ++samples_;
  max_temperature_ = std::max(max_temperature_, r.temperature_c);
  max_power_ = std::max(max_power_, r.power_w);
  if (r.sm_clock_mhz > 0 && (min_clock_ == 0 || r.sm_clock_mhz < min_clock_)) min_clock_ = r.sm_clock_mhz;
  const uint64_t t = ThrottleReasons(r.reasons);
  char state[128];
  std::snprintf(state, sizeof(state), "%u C, SM %u MHz, %.0f W", r.temperature_c, r.sm_clock_mhz, r.power_w);
  if (t != 0 && throttling_ == 0) {
    throttling_ = t;
    since_ = now;
    return gpu_ + " is throttling: " + DescribeThrottle(t) + " (" + state + ")";
  }
  if (t == 0 && throttling_ != 0) {
    const double lasted = now - since_;
    total_ += lasted;
    throttling_ = 0;
    char line[256];
    std::snprintf(line, sizeof(line), "%s stopped throttling after %.1f s (%s)", gpu_.c_str(), lasted, state);
    return line;
  }
  if (t != 0 && t != throttling_) {
    throttling_ = t;
    return gpu_ + " is throttling, now: " + DescribeThrottle(t) + " (" + state + ")";
  }
  return "";
}

double ThrottleTracker::throttled_seconds(double now) const { return total_ + (throttling_ != 0 ? now - since_ : 0.0); }

namespace {

// NVML's entry points, by name (nvml.h's types as plain ones).
class NvmlSensor : public GpuSensor {
 public:
  using Init = int (*)();
  using Handle = int (*)(const char*, void**);
  using UnsignedOf = int (*)(void*, int, unsigned*);
  using Power = int (*)(void*, unsigned*);
  using Reasons = int (*)(void*, unsigned long long*);
  using Shutdown = int (*)();

  static std::unique_ptr<GpuSensor> Open(const std::string& address, std::string* why) {
    void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      *why = "libnvidia-ml.so.1 not found (NVML comes with the driver)";
      return nullptr;
    }
    auto sensor = std::unique_ptr<NvmlSensor>(new NvmlSensor(lib));
    auto* init = reinterpret_cast<Init>(::dlsym(lib, "nvmlInit_v2"));
    auto* handle = reinterpret_cast<Handle>(::dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    sensor->clock_ = reinterpret_cast<UnsignedOf>(::dlsym(lib, "nvmlDeviceGetClockInfo"));
    sensor->temperature_ = reinterpret_cast<UnsignedOf>(::dlsym(lib, "nvmlDeviceGetTemperature"));
    sensor->power_ = reinterpret_cast<Power>(::dlsym(lib, "nvmlDeviceGetPowerUsage"));
    sensor->reasons_ = reinterpret_cast<Reasons>(::dlsym(lib, "nvmlDeviceGetCurrentClocksEventReasons"));
    if (sensor->reasons_ == nullptr) {  // before NVML 12.2 the same call had this name
      sensor->reasons_ = reinterpret_cast<Reasons>(::dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons"));
    }
    sensor->shutdown_ = reinterpret_cast<Shutdown>(::dlsym(lib, "nvmlShutdown"));
    if (init == nullptr || handle == nullptr || sensor->clock_ == nullptr || sensor->temperature_ == nullptr ||
        sensor->power_ == nullptr || sensor->reasons_ == nullptr || sensor->shutdown_ == nullptr) {
      *why = "libnvidia-ml.so.1 lacks the calls needed";
      return nullptr;
    }
    if (const int r = init(); r != 0) {
      *why = "nvmlInit_v2 failed (" + std::to_string(r) + ")";
      return nullptr;
    }
    sensor->initialized_ = true;
    if (const int r = handle(address.c_str(), &sensor->device_); r != 0) {
      *why = "NVML does not know the GPU at " + address + " (" + std::to_string(r) + ")";
      return nullptr;
    }
    return sensor;
  }

  ~NvmlSensor() override {
    if (initialized_) shutdown_();
    ::dlclose(lib_);
  }

  GpuReading Read() override {
    GpuReading r;
    unsigned power_mw = 0;
    unsigned long long reasons = 0;
    r.valid = clock_(device_, /*NVML_CLOCK_SM=*/1, &r.sm_clock_mhz) == 0 &&
              temperature_(device_, /*NVML_TEMPERATURE_GPU=*/0, &r.temperature_c) == 0 &&
              power_(device_, &power_mw) == 0 && reasons_(device_, &reasons) == 0;
    r.power_w = power_mw / 1000.0;
    r.reasons = reasons;
    return r;
  }

 private:
  explicit NvmlSensor(void* lib) : lib_(lib) {}
  void* lib_;
  void* device_ = nullptr;
  bool initialized_ = false;
  UnsignedOf clock_ = nullptr, temperature_ = nullptr;
  Power power_ = nullptr;
  Reasons reasons_ = nullptr;
  Shutdown shutdown_ = nullptr;
};

}  // namespace

std::unique_ptr<GpuSensor> OpenNvmlSensor(const std::string& address, std::string* why) {
  return NvmlSensor::Open(address, why);
}

HealthMonitor::HealthMonitor(std::string gpu, std::string prefix, std::unique_ptr<GpuSensor> sensor,
                             std::function<StatusOr<PcieLink>()> read_link, double interval_s)
    : gpu_(std::move(gpu)), prefix_(std::move(prefix)), sensor_(std::move(sensor)),
      read_link_(std::move(read_link)), interval_s_(interval_s), tracker_(gpu_) {
  thread_ = std::thread([this] { Run(); });
}

HealthMonitor::~HealthMonitor() { Stop(); }

void HealthMonitor::Stop() {
  if (!thread_.joinable()) return;
  stop_ = true;
  thread_.join();
  stopped_at_ = SteadySeconds();
}

void HealthMonitor::Run() {
  double next = SteadySeconds();
  while (!stop_) {
    if (SteadySeconds() < next) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    next += interval_s_;
    const GpuReading reading = sensor_ ? sensor_->Read() : GpuReading();
    std::string line = tracker_.Observe(reading, SteadySeconds());
    // The link's speed, judged while the GPU works: three slow samples in
    // a row under load.
    if (!warned_speed_ && read_link_ && reading.valid && (reading.reasons & kGpuIdle) == 0) {
      const StatusOr<PcieLink> link = read_link_();
      const std::string slow = link.ok() ? LinkSpeedWarning(gpu_, *link) : "";
      slow_link_samples_ = slow.empty() ? 0 : slow_link_samples_ + 1;
      if (slow_link_samples_ >= 3) {
        warned_speed_ = true;
        std::printf("%swarning: %s\n", prefix_.c_str(), slow.c_str());
      }
    }
    if (!line.empty()) std::printf("%s%s\n", prefix_.c_str(), line.c_str());
    std::fflush(stdout);
  }
}

void HealthMonitor::StopAndRecord(nlohmann::ordered_json* record) {
  Stop();
  (*record)["samples"] = tracker_.samples();
  (*record)["throttled_s"] = tracker_.throttled_seconds(stopped_at_);
  (*record)["max_temperature_c"] = tracker_.max_temperature_c();
  (*record)["min_sm_clock_mhz"] = tracker_.min_sm_clock_mhz();
  (*record)["max_power_w"] = tracker_.max_power_w();
}

}  // namespace ddp
