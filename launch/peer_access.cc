#include "launch/peer_access.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <nlohmann/json.hpp>

#include "runtime/cuda/cuda_device.h"

namespace ddp {
namespace {

std::string Pair(const PeerLink& l) { return "GPU " + std::to_string(l.from) + " -> " + std::to_string(l.to); }

// Why a claimed link cannot be used, or "".
std::string Broken(const PeerLink& l) {
  switch (l.copy) {
    case PeerLink::Copy::kOk: return "";
    case PeerLink::Copy::kNotTried: return Pair(l) + ": peer access claimed but not checked";
    case PeerLink::Copy::kFailed: return Pair(l) + ": peer access claimed but the copy failed (" + l.detail + ")";
    case PeerLink::Copy::kWrongData: return Pair(l) + ": peer access claimed but the copy delivered wrong data";
    case PeerLink::Copy::kTimedOut: return Pair(l) + ": peer access claimed but the copy " + l.detail;
  }
  return "";
}

}  // namespace

NcclP2pSettings NcclP2pSettingsFromEnvironment() {
  NcclP2pSettings s;
  if (const char* v = std::getenv("NCCL_P2P_DISABLE")) s.p2p_disable = v;
  if (const char* v = std::getenv("NCCL_P2P_LEVEL")) s.p2p_level = v;
  return s;
}

PeerAccessDecision DecidePeerAccess(const PeerTopology& t, const NcclP2pSettings& user) {
  PeerAccessDecision d;
  std::string problem;  // why peer access is not usable, or ""
  if (!t.error.empty()) {
    problem = "the peer-access probe failed (" + t.error + ")";
  } else if (t.gpus < 2) {
    d.reason = t.gpus == 1 ? "single GPU: not applicable" : "no GPU: not applicable";
    return d;
  } else {
    int claimed = 0;
    for (const PeerLink& l : t.links) {
      if (!l.claimed) continue;
      ++claimed;
      if (problem.empty()) problem = Broken(l);
    }
    if (claimed == 0) {
      problem = "the " + std::to_string(t.gpus) + " GPUs (" + t.gpu_name +
                ") have no peer access to each other (GeForce cards have none)";
    } else if (problem.empty() && claimed < static_cast<int>(t.links.size())) {
      for (const PeerLink& l : t.links) {
        if (!l.claimed) {
          problem = Pair(l) + " has no peer access while other pairs have";
          break;
        }
      }
    }
  }
  const std::string settings = user.p2p_disable ? "NCCL_P2P_DISABLE=" + *user.p2p_disable
                               : user.p2p_level ? "NCCL_P2P_LEVEL=" + *user.p2p_level
                                                : "";
  if (!settings.empty()) {
    d.state = "user setting";
    d.reason = settings + " is set: NCCL's peer-to-peer left as set" +
               (problem.empty() ? " (the probe found peer access usable)" : "; the probe found " + problem);
    return d;
  }
  if (problem.empty()) {
    d.state = "usable";
    d.reason = "peer access between the " + std::to_string(t.gpus) + " GPUs (" + t.gpu_name +
               ") works: every copy checked";
    return d;
  }
  d.state = "disabled";
  d.set_p2p_disable = true;
  d.reason = problem + ": NCCL_P2P_DISABLE=1 for this job (NCCL goes through host memory instead of hanging on "
                       "peer copies)";
  return d;
}

std::string EncodePeerTopology(const PeerTopology& t) {
  nlohmann::json j;
  j["gpus"] = t.gpus;
  j["gpu_name"] = t.gpu_name;
  j["error"] = t.error;
  j["links"] = nlohmann::json::array();
  for (const PeerLink& l : t.links) {
    j["links"].push_back({{"from", l.from}, {"to", l.to}, {"claimed", l.claimed},
                          {"copy", static_cast<int>(l.copy)}, {"detail", l.detail}});
  }
  return j.dump();
}

StatusOr<PeerTopology> DecodePeerTopology(const std::string& text) {
  PeerTopology t;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    t.gpus = j.at("gpus").get<int>();
    t.gpu_name = j.at("gpu_name").get<std::string>();
    t.error = j.at("error").get<std::string>();
    for (const nlohmann::json& l : j.at("links")) {
      PeerLink link;
      link.from = l.at("from").get<int>();
      link.to = l.at("to").get<int>();
      link.claimed = l.at("claimed").get<bool>();
      const int copy = l.at("copy").get<int>();
      if (copy < 0 || copy > static_cast<int>(PeerLink::Copy::kTimedOut)) return Internal("bad copy state");
      link.copy = static_cast<PeerLink::Copy>(copy);
      link.detail = l.at("detail").get<std::string>();
      t.links.push_back(link);
    }
  } catch (const nlohmann::json::exception& e) {
    return Internal(std::string("the peer-access probe's report is unreadable: ") + e.what());
  }
  return t;
}

ChildRun RunInChild(const std::function<std::string(const std::function<void(const std::string&)>&)>& work,
                    double deadline_s) {
  ChildRun run;
  int result_pipe[2], progress_pipe[2];
  if (pipe(result_pipe) != 0) {
    run.status = Internal(std::string("pipe: ") + std::strerror(errno));
    return run;
  }
  if (pipe(progress_pipe) != 0) {
    close(result_pipe[0]);
    close(result_pipe[1]);
    run.status = Internal(std::string("pipe: ") + std::strerror(errno));
    return run;
  }
  std::fflush(nullptr);  // nothing buffered twice
  const pid_t child = fork();
  if (child < 0) {
    run.status = Internal(std::string("fork: ") + std::strerror(errno));
    return run;
  }
  if (child == 0) {
    close(result_pipe[0]);
    close(progress_pipe[0]);
    const int progress_fd = progress_pipe[1];
    const std::string out = work([progress_fd](const std::string& step) {
      const std::string line = step + "\n";
      (void)!write(progress_fd, line.data(), line.size());
    });
    size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = write(result_pipe[1], out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    _exit(0);  // none of the parent's atexit handlers or static destructors
  }
  close(result_pipe[1]);
  close(progress_pipe[1]);
  std::string progress;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(deadline_s);
  bool result_open = true, progress_open = true, timed_out = false;
  while (result_open) {
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0.0) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{result_pipe[0], POLLIN, 0}, {progress_open ? progress_pipe[0] : -1, POLLIN, 0}};
    if (poll(fds, 2, static_cast<int>(left * 1000.0) + 1) < 0 && errno != EINTR) break;
    char buffer[4096];
    if (fds[1].revents != 0) {
      const ssize_t n = read(progress_pipe[0], buffer, sizeof(buffer));
      if (n > 0) progress.append(buffer, static_cast<size_t>(n));
      else progress_open = false;
    }
    if (fds[0].revents != 0) {
      const ssize_t n = read(result_pipe[0], buffer, sizeof(buffer));
      if (n > 0) run.output.append(buffer, static_cast<size_t>(n));
      else result_open = false;
    }
  }
  if (timed_out) kill(child, SIGKILL);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  // What is left of the progress, then its last complete line.
  if (progress_open) {
    char buffer[4096];
    ssize_t n = 0;
    while ((n = read(progress_pipe[0], buffer, sizeof(buffer))) > 0) progress.append(buffer, static_cast<size_t>(n));
  }
  close(result_pipe[0]);
  close(progress_pipe[0]);
  while (!progress.empty() && progress.back() == '\n') progress.pop_back();
  const size_t cut = progress.rfind('\n');
  run.last_progress = cut == std::string::npos ? progress : progress.substr(cut + 1);
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.1f", deadline_s);
  if (timed_out) {
    run.status = DeadlineExceeded(std::string("did not finish within ") + seconds + " s");
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    run.status = Internal(WIFSIGNALED(status) ? "died of signal " + std::to_string(WTERMSIG(status))
                                              : "exited with status " + std::to_string(WEXITSTATUS(status)));
  }
  return run;
}

PeerTopology ProbePeerTopology(double deadline_s) {
  const ChildRun run = RunInChild(
      [](const std::function<void(const std::string&)>& progress) {
        PeerTopology t;
        const cuda::DeviceQuery query = cuda::QueryDevices();
        if (!query.error.empty()) {
          t.error = "CUDA cannot start: " + query.error;
          return EncodePeerTopology(t);
        }
        t.gpus = query.count;
        if (t.gpus > 0) t.gpu_name = cuda::DeviceName(0);
        for (int a = 0; a < t.gpus; ++a) {
          for (int b = 0; b < t.gpus; ++b) {
            if (a == b) continue;
            PeerLink l;
            l.from = a;
            l.to = b;
            l.claimed = cuda::CanAccessPeer(a, b);
            t.links.push_back(l);
          }
        }
        for (size_t i = 0; i < t.links.size(); ++i) {
          PeerLink& l = t.links[i];
          if (!l.claimed) continue;
          progress(std::to_string(i) + " " + EncodePeerTopology(t));
          const cuda::PeerCopyResult r = cuda::CheckPeerCopy(l.from, l.to, size_t{4} << 20);
          l.copy = !r.error.empty() ? PeerLink::Copy::kFailed
                   : r.data_ok      ? PeerLink::Copy::kOk
                                    : PeerLink::Copy::kWrongData;
          l.detail = r.error;
        }
        return EncodePeerTopology(t);
      },
      deadline_s);
  return PeerTopologyFromChild(run);
}

PeerTopology PeerTopologyFromChild(const ChildRun& run) {
  PeerTopology failed;
  if (run.status.ok()) {
    StatusOr<PeerTopology> t = DecodePeerTopology(run.output);
    if (t.ok()) return *t;
    failed.error = t.status().message();
    return failed;
  }
  size_t in_flight = 0;
  const size_t space = run.last_progress.find(' ');
  if (run.status.code() == StatusCode::kDeadlineExceeded && space != std::string::npos &&
      std::sscanf(run.last_progress.c_str(), "%zu", &in_flight) == 1) {
    StatusOr<PeerTopology> t = DecodePeerTopology(run.last_progress.substr(space + 1));
    if (t.ok() && in_flight < t->links.size()) {
      t->links[in_flight].copy = PeerLink::Copy::kTimedOut;
      t->links[in_flight].detail = run.status.message();
      return *t;
    }
  }
  failed.error = run.status.message();
  return failed;
}

nlohmann::ordered_json PeerAccessJson(const PeerAccessDecision& decision) {
  return {{"state", decision.state}, {"nccl_p2p_disable", decision.set_p2p_disable}, {"reason", decision.reason}};
}

}  // namespace ddp
