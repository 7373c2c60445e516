// The peer-access decision for the topologies a node can present, injected,
// and the probe's child process and deadline with injected children.
#include "launch/peer_access.h"

#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace ddp {
namespace {

// `gpus` GPUs named `name`, every ordered pair claiming peer access or not,
// each claimed copy ending as `copy`.
PeerTopology Box(int gpus, const std::string& name, bool claimed, PeerLink::Copy copy) {
  PeerTopology t;
  t.gpus = gpus;
  t.gpu_name = name;
  for (int a = 0; a < gpus; ++a) {
    for (int b = 0; b < gpus; ++b) {
      if (a == b) continue;
      PeerLink l;
      l.from = a;
      l.to = b;
      l.claimed = claimed;
      l.copy = claimed ? copy : PeerLink::Copy::kNotTried;
      t.links.push_back(l);
    }
  }
  return t;
}

TEST(PeerAccessTest, GeForceAdaWithoutPeerAccessDisablesP2p) {
  const PeerAccessDecision d =
      DecidePeerAccess(Box(4, "NVIDIA GeForce RTX 4090", false, PeerLink::Copy::kNotTried), {});
  EXPECT_EQ(d.state, "disabled");
  EXPECT_TRUE(d.set_p2p_disable);
  EXPECT_EQ(d.reason,
            "the 4 GPUs (NVIDIA GeForce RTX 4090) have no peer access to each other (GeForce cards have none): "
            "NCCL_P2P_DISABLE=1 for this job (NCCL goes through host memory instead of hanging on peer copies)");
}

TEST(PeerAccessTest, ClaimedButTheCopyTimesOutDisablesP2p) {
  PeerTopology t = Box(2, "NVIDIA GeForce RTX 4090", true, PeerLink::Copy::kOk);
  t.links[1].copy = PeerLink::Copy::kTimedOut;
  t.links[1].detail = "did not finish within 8.0 s";
  const PeerAccessDecision d = DecidePeerAccess(t, {});
  EXPECT_EQ(d.state, "disabled");
  EXPECT_TRUE(d.set_p2p_disable);
  EXPECT_EQ(d.reason.rfind("GPU 1 -> 0: peer access claimed but the copy did not finish within 8.0 s: "
                           "NCCL_P2P_DISABLE=1 for this job",
                           0),
            0u)
      << d.reason;
  // Wrong data and a failed copy are as unusable.
  t.links[1].copy = PeerLink::Copy::kWrongData;
  EXPECT_TRUE(DecidePeerAccess(t, {}).set_p2p_disable);
  t.links[1].copy = PeerLink::Copy::kFailed;
  t.links[1].detail = "cudaDeviceEnablePeerAccess: peer access is not supported between these two devices";
  EXPECT_NE(DecidePeerAccess(t, {}).reason.find("the copy failed (cudaDeviceEnablePeerAccess: peer access"),
            std::string::npos);
  // Some pairs with peer access, one without: NCCL's switch is global.
  PeerTopology mixed = Box(3, "NVIDIA RTX A6000", true, PeerLink::Copy::kOk);
  mixed.links[3].claimed = false;
  mixed.links[3].copy = PeerLink::Copy::kNotTried;
  const PeerAccessDecision m = DecidePeerAccess(mixed, {});
  EXPECT_TRUE(m.set_p2p_disable);
  EXPECT_EQ(m.reason.rfind("GPU 1 -> 2 has no peer access while other pairs have", 0), 0u) << m.reason;
}

TEST(PeerAccessTest, TheUsersOwnNcclVariableIsRespected) {
  PeerTopology broken = Box(2, "NVIDIA GeForce RTX 4090", true, PeerLink::Copy::kTimedOut);
  for (auto& l : broken.links) l.detail = "did not finish within 8.0 s";
  NcclP2pSettings user;
  user.p2p_disable = "0";
  PeerAccessDecision d = DecidePeerAccess(broken, user);
  EXPECT_EQ(d.state, "user setting");
  EXPECT_FALSE(d.set_p2p_disable);
  EXPECT_EQ(d.reason,
            "NCCL_P2P_DISABLE=0 is set: NCCL's peer-to-peer left as set; the probe found GPU 0 -> 1: peer access "
            "claimed but the copy did not finish within 8.0 s");
  NcclP2pSettings level;
  level.p2p_level = "PIX";
  d = DecidePeerAccess(Box(2, "NVIDIA H100 PCIe", true, PeerLink::Copy::kOk), level);
  EXPECT_EQ(d.state, "user setting");
  EXPECT_FALSE(d.set_p2p_disable);
  EXPECT_EQ(d.reason, "NCCL_P2P_LEVEL=PIX is set: NCCL's peer-to-peer left as set (the probe found peer access usable)");
}

TEST(PeerAccessTest, DataCentreGpusWithPeerAccessKeepIt) {
  const PeerAccessDecision d = DecidePeerAccess(Box(8, "NVIDIA H100 80GB HBM3", true, PeerLink::Copy::kOk), {});
  EXPECT_EQ(d.state, "usable");
  EXPECT_FALSE(d.set_p2p_disable);
  EXPECT_EQ(d.reason, "peer access between the 8 GPUs (NVIDIA H100 80GB HBM3) works: every copy checked");
}

TEST(PeerAccessTest, OneGpuOrAFailedProbe) {
  PeerAccessDecision d = DecidePeerAccess(Box(1, "NVIDIA H200", false, PeerLink::Copy::kNotTried), {});
  EXPECT_EQ(d.state, "not applicable");
  EXPECT_EQ(d.reason, "single GPU: not applicable");
  EXPECT_FALSE(d.set_p2p_disable);
  PeerTopology failed;
  failed.error = "did not finish within 8.0 s";
  d = DecidePeerAccess(failed, {});
  EXPECT_EQ(d.state, "disabled");
  EXPECT_TRUE(d.set_p2p_disable);
  EXPECT_EQ(d.reason.rfind("the peer-access probe failed (did not finish within 8.0 s): NCCL_P2P_DISABLE=1", 0), 0u);
}

TEST(PeerAccessTest, TopologyTravelsAsText) {
  PeerTopology t = Box(2, "NVIDIA GeForce RTX 4090 \"quoted\"", true, PeerLink::Copy::kFailed);
  t.links[0].detail = "cudaMalloc: out of memory";
  StatusOr<PeerTopology> back = DecodePeerTopology(EncodePeerTopology(t));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->gpus, 2);
  EXPECT_EQ(back->gpu_name, t.gpu_name);
  ASSERT_EQ(back->links.size(), 2u);
  EXPECT_EQ(back->links[0].detail, "cudaMalloc: out of memory");
  EXPECT_EQ(back->links[1].from, 1);
  EXPECT_TRUE(back->links[1].claimed);
  EXPECT_EQ(back->links[1].copy, PeerLink::Copy::kFailed);
  EXPECT_FALSE(DecodePeerTopology("{\"gpus\": 2}").ok());
  EXPECT_FALSE(DecodePeerTopology("not json").ok());
}

using Progress = std::function<void(const std::string&)>;

TEST(PeerAccessChildTest, OutputComesBack) {
  const ChildRun run = RunInChild([](const Progress& progress) {
    progress("working");
    return std::string(100000, 'x') + "end";  // more than a pipe holds at once
  }, 10.0);
  ASSERT_TRUE(run.status.ok()) << run.status.ToString();
  EXPECT_EQ(run.output.size(), 100003u);
  EXPECT_EQ(run.output.substr(100000), "end");
  EXPECT_EQ(run.last_progress, "working");
}

TEST(PeerAccessChildTest, AHangIsCutAtTheDeadlineNamingTheLastStep) {
  const auto start = std::chrono::steady_clock::now();
  const ChildRun run = RunInChild([](const Progress& progress) {
    progress("copying GPU 0 -> 1");
    std::this_thread::sleep_for(std::chrono::seconds(60));  // what a hung peer copy does
    return std::string("never");
  }, 0.5);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(run.status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(run.status.message(), "did not finish within 0.5 s");
  EXPECT_EQ(run.last_progress, "copying GPU 0 -> 1");
  EXPECT_LT(took, 5.0);
}

TEST(PeerAccessChildTest, AChildThatDiesIsAnError) {
  ChildRun run = RunInChild([](const Progress&) -> std::string { _exit(3); }, 10.0);
  EXPECT_EQ(run.status.message(), "exited with status 3");
  run = RunInChild([](const Progress&) -> std::string { std::abort(); }, 10.0);
  EXPECT_EQ(run.status.message(), "died of signal 6");
}

TEST(PeerAccessChildTest, AProbeThatHungMidCopyNamesThatLink) {
  PeerTopology so_far = Box(2, "NVIDIA GeForce RTX 4090", true, PeerLink::Copy::kNotTried);
  so_far.links[0].copy = PeerLink::Copy::kOk;
  ChildRun hung;
  hung.status = DeadlineExceeded("did not finish within 8.0 s");
  hung.last_progress = "1 " + EncodePeerTopology(so_far);
  const PeerTopology t = PeerTopologyFromChild(hung);
  EXPECT_TRUE(t.error.empty()) << t.error;
  ASSERT_EQ(t.links.size(), 2u);
  EXPECT_EQ(t.links[0].copy, PeerLink::Copy::kOk);
  EXPECT_EQ(t.links[1].copy, PeerLink::Copy::kTimedOut);
  const PeerAccessDecision d = DecidePeerAccess(t, {});
  EXPECT_TRUE(d.set_p2p_disable);
  EXPECT_EQ(d.reason.rfind("GPU 1 -> 0: peer access claimed but the copy did not finish within 8.0 s", 0), 0u);
  // Hung before any copy: the probe failed, which disables too.
  hung.last_progress = "";
  EXPECT_EQ(PeerTopologyFromChild(hung).error, "did not finish within 8.0 s");
}

TEST(PeerAccessChildTest, ThisMachinesProbeFinishes) {
  // Without a GPU: none counted, nothing to decide. With one, a real probe.
  const PeerTopology t = ProbePeerTopology(30.0);
  EXPECT_TRUE(t.error.empty()) << t.error;
  const PeerAccessDecision d = DecidePeerAccess(t, {});
  if (t.gpus < 2) EXPECT_EQ(d.state, "not applicable");
  EXPECT_FALSE(d.reason.empty());
}

}  // namespace
}  // namespace ddp
