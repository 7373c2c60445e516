// GPU health on the CPU: a fake sysfs tree (an x16 card at x8, a gen 4
// card at gen 3), injected sensor readings (throttling starting, changing
// and ending; idle is not throttling), and the monitor thread over a fake
// sensor and link.
#include "launch/gpu_health.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/durable_files.h"
#include "runtime/testing/temp_path.h"

namespace ddp {
namespace {

std::string FakeSysfs(const std::string& name, const std::string& address, const std::string& speed,
                      const std::string& max_speed, const std::string& width, const std::string& max_width) {
  const std::string root = testing::TempPath(name);
  const std::string dir = root + "/bus/pci/devices/" + address;
  EXPECT_TRUE(MakeDirectories(dir).ok());
  for (const auto& [file, value] : {std::pair<std::string, std::string>{"current_link_speed", speed},
                                    {"max_link_speed", max_speed},
                                    {"current_link_width", width},
                                    {"max_link_width", max_width}}) {
    std::ofstream(dir + "/" + file) << value << "\n";
  }
  return root;
}

TEST(GpuHealthTest, AnX16CardAtX8IsWarnedAbout) {
  const std::string sysfs = FakeSysfs("x8", "0000:01:00.0", "16.0 GT/s PCIe", "16.0 GT/s PCIe", "8", "16");
  // NVML's 8-digit domain, upper case, names the same device.
  StatusOr<PcieLink> link = ReadPcieLink(sysfs, "00000000:01:00.0");
  ASSERT_TRUE(link.ok()) << link.status().message();
  EXPECT_EQ(link->address, "0000:01:00.0");
  EXPECT_EQ(link->width, 8);
  EXPECT_EQ(link->max_width, 16);
  EXPECT_EQ(PcieGeneration(link->speed_gts), 4);
  EXPECT_EQ(DescribeLink(link->speed_gts, link->width), "gen 4 x8");
  EXPECT_EQ(LinkWidthWarning("GPU 0", *link),
            "GPU 0 (0000:01:00.0) runs its PCIe link at x8, below the card's x16: 50% of the bandwidth for NCCL and "
            "host copies (a slot wired x8, a riser, or a shared switch); an x16 slot gives it all");
  EXPECT_EQ(LinkSpeedWarning("GPU 0", *link), "");  // full speed
  const std::string full = FakeSysfs("x16", "0000:02:00.0", "16.0 GT/s PCIe", "16.0 GT/s PCIe", "16", "16");
  EXPECT_EQ(LinkWidthWarning("GPU 1", ReadPcieLink(full, "0000:02:00.0").value()), "");
  EXPECT_FALSE(ReadPcieLink(full, "0000:09:00.0").ok());
}

TEST(GpuHealthTest, ASlowLinkUnderLoadIsNamedWithItsGenerations) {
  const std::string sysfs = FakeSysfs("gen3", "0000:03:00.0", "8.0 GT/s PCIe", "16.0 GT/s PCIe", "16", "16");
  const PcieLink link = ReadPcieLink(sysfs, "0000:03:00.0").value();
  EXPECT_EQ(LinkSpeedWarning("GPU 2", link),
            "GPU 2 (0000:03:00.0) runs its PCIe link at gen 3 x16 under load, below the card's gen 4 x16: check the "
            "slot's generation, the BIOS PCIe setting or a riser");
  EXPECT_EQ(PcieGeneration(2.5), 1);
  EXPECT_EQ(PcieGeneration(32.0), 5);
  EXPECT_EQ(PcieGeneration(3.0), 0);
}

GpuReading Reading(unsigned clock, unsigned temperature, double power, uint64_t reasons) {
  GpuReading r;
  r.valid = true;
  r.sm_clock_mhz = clock;
  r.temperature_c = temperature;
  r.power_w = power;
  r.reasons = reasons;
  return r;
}

TEST(GpuHealthTest, ThrottlingIsLoggedWhenItStartsChangesAndEnds) {
  ThrottleTracker t("GPU 0");
  EXPECT_EQ(t.Observe(Reading(2520, 60, 350, 0), 0.0), "");
  EXPECT_EQ(t.Observe(Reading(210, 35, 20, 0x1), 1.0), "");  // idle is not throttling
  EXPECT_EQ(t.Observe(Reading(1800, 84, 300, 0x40), 2.0),
            "GPU 0 is throttling: hardware thermal slowdown (84 C, SM 1800 MHz, 300 W)");
  EXPECT_EQ(t.Observe(Reading(1800, 84, 300, 0x40), 3.0), "");
  EXPECT_EQ(t.Observe(Reading(1650, 86, 450, 0x44), 4.0),
            "GPU 0 is throttling, now: hardware thermal slowdown, power cap (86 C, SM 1650 MHz, 450 W)");
  EXPECT_DOUBLE_EQ(t.throttled_seconds(5.0), 3.0);
  EXPECT_EQ(t.Observe(Reading(2500, 70, 340, 0), 7.0), "GPU 0 stopped throttling after 5.0 s (70 C, SM 2500 MHz, 340 W)");
  EXPECT_DOUBLE_EQ(t.throttled_seconds(100.0), 5.0);
  EXPECT_EQ(t.max_temperature_c(), 86u);
  EXPECT_EQ(t.min_sm_clock_mhz(), 210u);
  EXPECT_DOUBLE_EQ(t.max_power_w(), 450.0);
  EXPECT_EQ(t.samples(), 6);
  EXPECT_EQ(t.Observe(GpuReading(), 8.0), "");  // an invalid reading counts for nothing
  EXPECT_EQ(t.samples(), 6);
}

class FakeSensor : public GpuSensor {
 public:
  GpuReading Read() override { return Reading(2000, 70, 300, reads_++ >= 2 ? 0x8 : 0); }

 private:
  int reads_ = 0;
};

TEST(GpuHealthTest, TheMonitorSamplesAndWarnsOfASlowLinkOnceUnderLoad) {
  const std::string sysfs = FakeSysfs("monitor", "0000:04:00.0", "8.0 GT/s PCIe", "16.0 GT/s PCIe", "16", "16");
  ::testing::internal::CaptureStdout();
  HealthMonitor monitor("GPU 3", "ddp_train: rank 3: ", std::make_unique<FakeSensor>(),
                        [sysfs] { return ReadPcieLink(sysfs, "0000:04:00.0"); }, 0.02);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  monitor.Stop();
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_GE(monitor.tracker().samples(), 5);
  EXPECT_NE(out.find("ddp_train: rank 3: GPU 3 is throttling: hardware slowdown (70 C, SM 2000 MHz, 300 W)\n"),
            std::string::npos)
      << out;
  const std::string slow = "ddp_train: rank 3: warning: GPU 3 (0000:04:00.0) runs its PCIe link at gen 3 x16 under load";
  ASSERT_NE(out.find(slow), std::string::npos) << out;
  EXPECT_EQ(out.find(slow, out.find(slow) + 1), std::string::npos) << "warned twice: " << out;
  EXPECT_GT(monitor.tracker().throttled_seconds(monitor.stopped_at()), 0.0);
}

}  // namespace
}  // namespace ddp
