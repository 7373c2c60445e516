// Whether NCCL may use peer-to-peer copies between a node's GPUs (DESIGN.md,
// Launch). GeForce cards such as the RTX 4090 have no PCIe peer access, yet
// some drivers report it or let NCCL try, and PCIe switches with ACS or an
// IOMMU in the way do the same: NCCL then hangs in its first all-reduce
// (NVIDIA/nccl-tests#117, tinygrad/open-gpu-kernel-modules#45).
//
// Before NCCL starts, with two or more GPUs on the node, local rank 0 asks
// CUDA which pairs claim peer access and, for those, copies a buffer each
// way and checks it arrived, all in a child process with a deadline (a copy
// that hangs in the driver cannot be timed out from inside the process).
// Where peer access is not usable, every local rank sets
// NCCL_P2P_DISABLE=1 for its communicator, unless the user set
// NCCL_P2P_DISABLE or NCCL_P2P_LEVEL: then theirs stands. One line says
// what was decided and why; the summary's gpu_health records it.
//
// The decision is a pure function of what the probe saw, so tests inject
// topologies; the probe's child process and deadline are tested with an
// injected child.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/status.h"

namespace ddp {

// One direction between two GPUs.
struct PeerLink {
  enum class Copy { kNotTried, kOk, kFailed, kWrongData, kTimedOut };
  int from = 0, to = 0;
  bool claimed = false;  // cudaDeviceCanAccessPeer
  Copy copy = Copy::kNotTried;
  std::string detail;  // CUDA's error for kFailed
};

// What the probe saw on this node. `error` (the probe itself failed, or ran
// past its deadline before it counted the GPUs) leaves the rest empty.
struct PeerTopology {
  int gpus = 0;
  std::string gpu_name;  // device 0's name ("NVIDIA GeForce RTX 4090")
  std::vector<PeerLink> links;
  std::string error;
};

// The user's own NCCL settings, as the environment has them.
struct NcclP2pSettings {
  std::optional<std::string> p2p_disable, p2p_level;
};
NcclP2pSettings NcclP2pSettingsFromEnvironment();

struct PeerAccessDecision {
  // "not applicable", "usable", "disabled" or "user setting".
  std::string state = "not applicable";
  bool set_p2p_disable = false;  // set NCCL_P2P_DISABLE=1 for this job
  std::string reason;            // the start line's text (for "not applicable", why)
};
PeerAccessDecision DecidePeerAccess(const PeerTopology& topology, const NcclP2pSettings& user);

// The topology as one line of text and back: local rank 0 probes and sends
// it to the node's other ranks.
std::string EncodePeerTopology(const PeerTopology& topology);
StatusOr<PeerTopology> DecodePeerTopology(const std::string& text);

// Runs `work` in a forked child. `status` is OK with `output` (what `work`
// returned) once it exits; an error once `deadline_s` passes (the child is
// then killed) or when it dies. `work` gets a function to report progress
// with: `last_progress` keeps the last line it gave, so a caller can tell
// what hung. The parent must not have initialized CUDA: a child of a CUDA
// process cannot use it.
struct ChildRun {
  Status status;
  std::string output, last_progress;
};
ChildRun RunInChild(const std::function<std::string(const std::function<void(const std::string&)>&)>& work,
                    double deadline_s);

// The probe: in a child, the GPUs' name, every ordered pair's claim and,
// for each claimed one, a verified copy. Before each copy the child reports
// the link in flight and the topology so far ("INDEX JSON"):
// PeerTopologyFromChild reads a run that hung there as that link timing out.
PeerTopology ProbePeerTopology(double deadline_s);
PeerTopology PeerTopologyFromChild(const ChildRun& run);

// The decision as the summary's GPU-health record holds it: {state,
// nccl_p2p_disable, reason}.
nlohmann::ordered_json PeerAccessJson(const PeerAccessDecision& decision);

}  // namespace ddp
