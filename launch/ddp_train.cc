// ddp_train: data-parallel training of ResNet and BERT. One rank
// per process, under mpirun, srun --mpi=pmix, or alone. See DESIGN.md for
// the command-line contract.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <thread>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "comm/bootstrap.h"
#include "comm/contention_probe.h"
#include "comm/mpi_communicator.h"
#include "comm/staged_communicator.h"
#ifdef DDP_HAVE_CUDA
#include "comm/nccl_communicator.h"
#endif
#include "comm/watchdog.h"
#include "launch/config_file.h"
#include "launch/device_binding.h"
#include "launch/fault_injection.h"
#include "launch/flag_help.h"
#include "launch/memory_planner.h"
#include "launch/peer_access.h"
#include "launch/preemption.h"
#include "launch/rank_device.h"
#include "launch/train_options.h"
#include "launch/trainer.h"
#include "launch/version.h"
#include "models/registry.h"
#include "runtime/allocator.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/durable_files.h"
#include "runtime/tensor.h"

DECLARE_bool(check_flags);  // launch/train_options.cc

namespace ddp {
namespace {

// One clear line (naming the rank when there are several), then a non-zero
// exit. Every rank gets here together: failures are agreed first.
int Fail(const RankInfo& ranks, const Status& status) {
  if (ranks.world_size > 1) {
    std::fprintf(stderr, "ddp_train: rank %d: error: %s\n", ranks.rank, status.message().c_str());
  } else {
    std::fprintf(stderr, "ddp_train: error: %s\n", status.message().c_str());
  }
  return 1;
}

// A fatal condition the user can act on (out of memory): one line, then
// every rank ends (AbortJob: the others may be inside a collective). The
// others first get a moment to say their own line: where every rank runs
// out at the same step, each then reports it rather than being killed.
RankInfo g_ranks;
void FatalOnThisRank(const std::string& line) {
  if (g_ranks.world_size > 1) {
    std::fprintf(stderr, "ddp_train: rank %d: error: %s\n", g_ranks.rank, line.c_str());
    std::fflush(nullptr);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    AbortJob();
  }
  std::fprintf(stderr, "ddp_train: error: %s\n", line.c_str());
  std::fflush(nullptr);
  std::_Exit(1);  // no static destructors: CUDA is in no state to run them
}

// An exception nothing caught, on any thread (a corrupt sample a rank
// cannot skip, a bug): one line, then the job ends. No unwinding: the
// destructors on the way would wait in collectives (MPI_Comm_free,
// MPI_Finalize) for ranks still training.
void OnUncaughtException() {
  std::string what = "internal error, a bug in ddp_train: std::terminate without an exception";
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::bad_alloc&) {
      // A size from the flags past the host's memory: no std:: text for the user.
      // Training: host memory also holds the loader's batches in flight.
      const std::string context = OutOfMemoryContext();
      what = "out of host memory " + context +
             (context.rfind("training ", 0) == 0 ? " (or a smaller --prefetch, --loader-threads)" : "");
    } catch (const InputError& x) {
      what = x.what();  // names the flag and file
    } catch (const std::exception& x) {
      what = std::string("internal error, a bug in ddp_train: an exception nothing handled (") + x.what() + ")";
    } catch (...) {
      what = "internal error, a bug in ddp_train: an exception nothing handled";
    }
  }
  FatalOnThisRank(what + "; ending the job");
}

// The data-plane communicator for this rank's device: NCCL, MPI staged
// through pinned memory on a GPU, or MPI on the host.
StatusOr<std::unique_ptr<Communicator>> MakeCommunicator(const TrainOptions& o, MPI_Comm world, void* stream) {
  if (o.gpu < 0) return std::unique_ptr<Communicator>(std::make_unique<MpiCommunicator>(world));
  if (o.comm == "mpi") {
    return std::unique_ptr<Communicator>(
        std::make_unique<StagedCommunicator>(std::make_unique<MpiCommunicator>(world), o.gpu, stream));
  }
#ifdef DDP_HAVE_CUDA
  ASSIGN_OR_RETURN(std::unique_ptr<NcclCommunicator> nccl, NcclCommunicator::Create(world, o.gpu, stream));
  return std::unique_ptr<Communicator>(std::move(nccl));
#else
  return Unimplemented("--comm nccl: this binary was built without CUDA");
#endif
}

// A double as its exact decimal (17 significant digits).
std::string Exact(double value) {
  char text[40];
  std::snprintf(text, sizeof(text), "%.17g", value);
  return text;
}

// Settings that every rank must share; a mismatch would hang or corrupt.
std::vector<std::pair<std::string, std::string>> SharedSettings(const TrainOptions& o) {
  return {{"--model", o.model},
          {"--device-memory-limit", std::to_string(o.device_memory_limit)},
          {"--batch-size", std::to_string(o.batch_size)},
          {"--accumulation-steps", std::to_string(o.accumulation_steps)},
          {"--steps", std::to_string(o.steps)},
          {"--epochs", std::to_string(o.epochs)},
          {"--num-classes", std::to_string(o.num_classes)},
          {"--seq-len", std::to_string(o.seq_len)},
          {"--dropout", std::to_string(o.dropout)},
          {"--task", o.task},
          {"--image-size", std::to_string(o.image_size)},
          {"--crop-scale", Exact(o.crop_scale_min) + "," + Exact(o.crop_scale_max)},
          {"--hflip", o.hflip ? "true" : "false"},
          {"--data", o.data},
          {"--eval-data", o.eval_data},
          {"--seed", std::to_string(o.seed)},
          {"--optimizer", o.optimizer},
          {"--bucket-mb", o.bucket_mb_auto ? "auto" : std::to_string(o.bucket_mb)},
          {"--first-bucket-mb", std::to_string(o.first_bucket_mb)},
          {"--overlap", o.overlap ? "true" : "false"},
          {"--zero-stage", std::to_string(o.zero_stage)},
          {"--zero-prefetch", std::to_string(o.zero_prefetch)},
          {"--grad-compression", DTypeName(o.wire_dtype)},
          {"--precision", o.precision},
          {"--loss-scale", LossScaleName(o.loss_scale)},
          {"--memory-format", o.memory_format},
          {"--loss-scale-growth-interval", std::to_string(o.loss_scale.growth_interval)},
          {"--deterministic", o.deterministic ? "true" : "false"},
          {"--cuda-graphs", o.cuda_graphs ? "true" : "false"},
          {"--checkpoint-dir", o.checkpoint_dir},
          {"--checkpoint-every", std::to_string(o.checkpoint_every)},
          {"--resume", o.resume ? "true" : "false"},
          {"--comm-timeout-s", std::to_string(o.comm_timeout_s)},
          // Each a collective paired with another rank's (evaluation,
          // clipping's norm), or replicas drifting apart silently.
          {"--eval-every", std::to_string(o.eval_every)},
          {"--clip-grad-norm", Exact(o.clip_grad_norm)},
          {"--shuffle", o.shuffle ? "true" : "false"},
          {"--lr", Exact(o.lr)},
          {"--momentum", Exact(o.momentum)},
          {"--weight-decay", Exact(o.weight_decay)},
          {"--nesterov", o.nesterov ? "true" : "false"},
          {"--decay-bn-bias", o.decay_bn_bias ? "true" : "false"},
          {"--label-smoothing", Exact(o.label_smoothing)},
          {"--warmup-steps", std::to_string(o.schedule.warmup_steps)},
          {"--lr-schedule", LrScheduleKindName(o.schedule.kind)},
          {"--lr-step-size", std::to_string(o.schedule.step_size)},
          {"--lr-step-gamma", Exact(o.schedule.step_gamma)},
          {"--lr-poly-power", Exact(o.schedule.poly_power)},
          {"--zero-init-residual", o.zero_init_residual ? "true" : "false"},
          {"--activation-checkpointing", o.activation_checkpointing ? "true" : "false"}};
}

// The flags left after gflags (none is expected), --config, then the
// options' own checks; and the test hooks of the environment.
StatusOr<TrainOptions> ParseOptions(int argc, char** argv, FaultInjection* faults) {
  if (argc > 1) return InvalidArgument(std::string("unexpected argument '") + argv[1] + "'");
  RETURN_IF_ERROR(ApplyConfigFile());
  ASSIGN_OR_RETURN(TrainOptions options, ReadTrainOptions());
  ASSIGN_OR_RETURN(*faults, FaultInjection::FromEnvironment());
  return options;
}

// --check-flags: the checks every rank makes before MPI's first
// collective, and the model's name, on this process alone.
int CheckFlagsOnly(int argc, char** argv) {
  FaultInjection faults;
  StatusOr<TrainOptions> options = ParseOptions(argc, argv, &faults);
  const Status status = options.ok() ? CheckModelName(options->model) : options.status();
  if (!status.ok()) {
    std::fprintf(stderr, "ddp_train: error: %s\n", status.message().c_str());
    return 1;
  }
  std::printf("ddp_train: the flags hold\n");
  return 0;
}

// The watchdog runs from MPI's start to its end (comm/bootstrap.h): a peer
// that stops answering anywhere ends the job after --comm-timeout-s with
// one line. The rank is named once it is known.
std::atomic<int> g_rank_in_lines{-1};
void StartWatchdog(double timeout_s) {
  CollectiveWatchdog::SetPhase("start-up");
  CollectiveWatchdog::Start(timeout_s, [](const std::string& line) {
    const int rank = g_rank_in_lines.load();
    if (rank >= 0) {
      std::fprintf(stderr, "ddp_train: rank %d: error: %s\n", rank, line.c_str());
    } else {
      std::fprintf(stderr, "ddp_train: error: %s\n", line.c_str());
    }
    std::fflush(nullptr);
    AbortJob();
  });
}

// --help: ddp_train's own flags by group (gflags' and glog's behind
// --helpfull); --version: what this binary was built with. True when one
// was asked for and printed.
bool PrintedHelpOrVersion(const char* usage) {
  std::string asked;
  if (gflags::GetCommandLineOption("help", &asked) && asked == "true") {
    std::fputs(GroupedHelp(std::string("ddp_train: data-parallel training of ResNet and BERT.\n\n  ") + usage,
                           {"launch/train_options.cc", "launch/plan_options.cc"})
                   .c_str(),
               stdout);
    return true;
  }
  if (gflags::GetCommandLineOption("version", &asked) && asked == "true") {
    for (const std::string& line : VersionLines()) std::printf("%s\n", line.c_str());
    return true;
  }
  return false;
}

// The process on its device: fatal lines and out-of-memory context, the
// GPU made current with one compute stream (kernels, allocations and
// copies all follow it; null on CPU ranks), the memory cap, and NCCL's own
// wait watchdog (ncclCommAbort past DDP_NCCL_TIMEOUT_S), which takes
// --comm-timeout-s unless that variable says otherwise.
void* BindDevice(const DeviceChoice& device, TrainOptions* options) {
  void* stream = nullptr;
  SetFatalErrorHandler(&FatalOnThisRank);
  // The trainer's parts say what each phase holds (launch/train_components.cc).
  SetOutOfMemoryContext("starting " + options->model);
  SetActivationBatchSize(options->batch_size);
  if (device.cuda) {
    cuda::SetDevice(device.gpu);
    options->gpu = device.gpu;
    stream = cuda::CreateStream();
    cuda::SetCurrentStream(device.gpu, stream);
  }
  GetAllocator(device.cuda ? Device::Cuda(device.gpu) : Device::Cpu())->set_limit_bytes(options->device_memory_limit);
  if (options->comm_timeout_s > 0.0) {
    setenv("DDP_NCCL_TIMEOUT_S", std::to_string(options->comm_timeout_s).c_str(), /*overwrite=*/0);
  }
  return stream;
}

// --contention-probe: every rank trains alone, as a job of one rank, while
// the probe's communicator spans the ranks.
Status CheckContentionProbe(const TrainOptions& options, const RankInfo& ranks, const DeviceChoice& device) {
  if (ranks.world_size < 2) {
    return InvalidArgument("--contention-probe measures ranks against each other: run 2 ranks or more");
  }
  if (device.cuda) {
    return InvalidArgument("--contention-probe measures CPU ranks, whose collectives share the cores that compute: "
                           "add --device cpu");
  }
  return Status::Ok();
}

// The probe's figures: rank 0 writes them to --contention-probe's file and
// prints them in one line; a failed write is agreed on.
Status FinishContentionProbe(ContentionProbe& probe, const TrainOptions& options, const RankInfo& ranks,
                             MPI_Comm world) {
  StatusOr<ContentionResult> measured = probe.Finish();
  if (!measured.ok()) return measured.status();
  Status written;
  if (ranks.rank == 0) {
    written = ReplaceFileAtomically(options.contention_probe, ContentionResultJson(*measured, options.model));
    const ContentionLoad &large = measured->large, &small = measured->small;
    const Contention& fitted = measured->fitted;
    std::printf("ddp_train: contention probe, %d ranks: backward %.1f ms alone, %.1f ms beside all-reduces of "
                "%.2f MiB (%.1f started in it), %.1f ms beside %.2f MiB ones (%.1f); the all-reduces %.1f and "
                "%.1f ms alone, %.1f and %.1f ms beside backward. Fitted: compute %+.1f%% and %.2f ms a "
                "collective, collectives %+.1f%% and %.2f ms each\n",
                measured->ranks, measured->compute_quiet_s * 1e3, large.backward_s * 1e3, large.bytes / 1048576.0,
                large.collectives, small.backward_s * 1e3, small.bytes / 1048576.0, small.collectives,
                large.collective_quiet_s * 1e3, small.collective_quiet_s * 1e3, large.collective_loaded_s * 1e3,
                small.collective_loaded_s * 1e3, fitted.compute_slowdown * 100.0,
                fitted.compute_per_collective_s * 1e3, fitted.comm_slowdown * 100.0,
                fitted.comm_per_collective_s * 1e3);
    std::fflush(stdout);
  }
  return AgreeOnStatus(world,
                       written.ok() ? written : Status(written.code(), "--contention-probe " + written.message()));
}

// A run stopped by SIGUSR1/SIGTERM at a step boundary: rank 0 says where
// and how to continue.
void ReportPreemption(const TrainResult& result, const TrainOptions& options, const RankInfo& ranks) {
  if (ranks.rank != 0) return;
  std::printf("ddp_train: stopped after step %lld on %s%s; exit %d\n",
              static_cast<long long>(result.preempted_at_step),
              result.preemption_signal != 0 ? PreemptionSignalName(result.preemption_signal) : "another rank's signal",
              options.checkpoint_dir.empty()
                  ? " (no --checkpoint-dir: nothing saved)"
                  : ("; checkpoint in " + options.checkpoint_dir + "/" + CheckpointName(result.preempted_at_step) +
                     ", continue with --resume")
                        .c_str(),
              kPreemptedExitCode);
  std::fflush(stdout);
}

// Rank-agreed facts of the built trainer: under --epochs each node counts
// its own copy of the data file's samples, and each rank read
// --checkpoint-dir's `latest` itself.
Status CheckTrainerAgrees(const Trainer& trainer, MPI_Comm world) {
  return CheckRanksAgree(world, {{"the parameter count", std::to_string(trainer.num_parameters())},
                                 {"the training data's sample count", std::to_string(trainer.dataset_size())},
                                 {"the step resumed from", std::to_string(trainer.start_step())}});
}

// From here a SIGUSR1 or SIGTERM stops every rank at a step boundary; past
// the grace, or at a second signal, the job ends at once.
void InstallPreemption(const RankInfo& ranks, double grace_s) {
  const std::string line_prefix =
      ranks.world_size > 1 ? "ddp_train: rank " + std::to_string(ranks.rank) + ": error: " : "ddp_train: error: ";
  InstallPreemptionHandlers(line_prefix, grace_s, [line_prefix](const std::string& line) {
    std::fprintf(stderr, "%s%s\n", line_prefix.c_str(), line.c_str());
    std::fflush(nullptr);
    AbortJob();
  });
}

// Up to MPI: flags, logging, the options (parsed before MPI starts, for
// --comm-timeout-s; a fault in them is agreed on once MPI is up) and the
// watchdog. Returns an exit code when the process is done already
// (--help, --version, --check-flags), else -1.
int StartProcess(int* argc, char*** argv, FaultInjection* faults, StatusOr<TrainOptions>* options) {
  const char* usage = "mpirun -np N ddp_train --model resnet50 [--batch-size 8 --steps 100 ...]";
  gflags::SetUsageMessage(usage);
  gflags::ParseCommandLineNonHelpFlags(argc, argv, true);
  if (PrintedHelpOrVersion(usage)) return 0;
  gflags::HandleCommandLineHelpFlags();  // --helpfull, --helpon=FILE, ...
  if (FLAGS_check_flags) return CheckFlagsOnly(*argc, *argv);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging((*argv)[0]);
  // Open MPI's hwloc prints "failed to find sysfs cpu topology" lines
  // where /sys is missing (some containers): noise before ddp_train's own
  // line. Hidden unless the user asked for them.
  setenv("HWLOC_HIDE_ERRORS", "1", /*overwrite=*/0);
  *options = ParseOptions(*argc, *argv, faults);
  StartWatchdog(options->ok() ? (*options)->comm_timeout_s : TrainOptions().comm_timeout_s);
  return -1;
}

int Main(int argc, char** argv) {
  FaultInjection faults;
  StatusOr<TrainOptions> options = InvalidArgument("unparsed");
  if (const int done = StartProcess(&argc, &argv, &faults, &options); done >= 0) return done;
  StatusOr<std::unique_ptr<MpiRuntime>> mpi = MpiRuntime::Init(&argc, &argv);
  if (!mpi.ok()) return Fail(RankInfo(), mpi.status());
  const RankInfo ranks = (*mpi)->info();
  g_ranks = ranks;
  if (ranks.world_size > 1) {
    g_rank_in_lines = ranks.rank;
  } else {
    CollectiveWatchdog::Stop();  // one rank: no peer to wait for
  }
  std::set_terminate(&OnUncaughtException);
  const MPI_Comm world = (*mpi)->world();

  if (Status s = AgreeOnStatus(world, options.status()); !s.ok()) return Fail(ranks, s);
  if (Status s = CheckRanksAgree(world, SharedSettings(*options)); !s.ok()) return Fail(ranks, s);
  if (options->device == "meta") {  // a memory plan: rank 0 plans, for the job's world or --plan-world-size
    SetFatalErrorHandler(&FatalOnThisRank);
    const Status planned = ranks.rank == 0 ? RunMemoryPlan(*options, ranks.world_size) : Status::Ok();
    if (Status s = AgreeOnStatus(world, planned); !s.ok()) return Fail(ranks, s);
    return 0;
  }
  StatusOr<PeerAccessDecision> peer_access = DecideNodePeerAccess(ranks, (*mpi)->node(), *options);
  if (Status s = AgreeOnStatus(world, peer_access.status()); !s.ok()) return Fail(ranks, s);
  // --comm nccl asked for by name uses NCCL even for one rank (a smoke test
  // of the data plane); otherwise one rank needs no communicator.
  const bool nccl_requested = options->comm == "nccl";
  DeviceChoice device;
  int visible_gpus = 0;
  if (Status s = SettleDevice(ranks, world, (*mpi)->node(), &*options, &device, &visible_gpus); !s.ok()) {
    return Fail(ranks, s);
  }
  void* stream = BindDevice(device, &*options);
  if (!options->contention_probe.empty()) {
    if (Status s = AgreeOnStatus(world, CheckContentionProbe(*options, ranks, device)); !s.ok()) {
      return Fail(ranks, s);
    }
  }
  std::unique_ptr<Communicator> comm;
  if (ranks.world_size > 1 || (device.cuda && nccl_requested)) {
    StatusOr<std::unique_ptr<Communicator>> made = MakeCommunicator(*options, world, stream);
    if (Status s = AgreeOnStatus(world, made.status()); !s.ok()) return Fail(ranks, s);
    comm = std::move(*made);
  }
  std::unique_ptr<ContentionProbe> probe;
  RankInfo trainer_ranks = ranks;
  if (!options->contention_probe.empty()) {
    // Loads of the asked size and a quarter of it (a fixed cost a
    // collective, told from a slowdown per byte).
    const int64_t bytes = static_cast<int64_t>(options->contention_probe_mb * (1 << 20)) / 4 * 4;
    probe = std::make_unique<ContentionProbe>(comm.get(), bytes, SmallerContentionLoad(bytes));
    trainer_ranks.rank = 0;
    trainer_ranks.world_size = 1;  // threads still divide the node's cores by local_size
  }
  StatusOr<std::unique_ptr<Trainer>> trainer =
      Trainer::Create(*options, probe ? nullptr : comm.get(), trainer_ranks, stream, faults);
  if (Status s = AgreeOnStatus(world, trainer.status()); !s.ok()) return Fail(ranks, s);
  if (Status s = CheckTrainerAgrees(**trainer, world); !s.ok()) return Fail(ranks, s);
  ExplainNotApplicable(device, visible_gpus, ranks, *options, &*peer_access);
  (*trainer)->RecordPeerAccess(*peer_access);
  if (Status s = (*trainer)->BroadcastInitialState(); !s.ok()) return Fail(ranks, s);
  if (probe) (*trainer)->set_contention_probe(probe.get());
  InstallPreemption(ranks, options->preemption_grace_s);
  StatusOr<TrainResult> result = (*trainer)->Run();
  if (!result.ok()) return Fail(ranks, result.status());
  if (device.cuda) cuda::Synchronize(stream);
  if (probe) {
    if (Status s = FinishContentionProbe(*probe, *options, ranks, world); !s.ok()) return Fail(ranks, s);
  }
  if (result->preempted_at_step >= 0) {
    ReportPreemption(*result, *options, ranks);
    return kPreemptedExitCode;
  }
  faults.AtEnd(ranks.rank);
  return 0;
}

}  // namespace
}  // namespace ddp

int main(int argc, char** argv) { return ddp::Main(argc, argv); }
