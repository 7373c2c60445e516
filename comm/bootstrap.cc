#include "comm/bootstrap.h"

#include <climits>

#include "comm/mpi_communicator.h"
#include "comm/watchdog.h"

namespace ddp {
namespace {

Status Checked(int code, const char* call) {
  if (code == MPI_SUCCESS) return Status::Ok();
  return Internal(std::string(call) + " failed: " + MpiErrorString(code));
}

}  // namespace

StatusOr<std::vector<std::string>> AllGatherStrings(MPI_Comm comm, const std::string& mine, const std::string& what) {
  const CollectiveWatchdog::Scope watched("MPI_Allgather of " + what);
  int world = 0;
  RETURN_IF_ERROR(Checked(MPI_Comm_size(comm, &world), "MPI_Comm_size"));
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(world), offsets(world);
  RETURN_IF_ERROR(Checked(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm), "MPI_Allgather"));
  int total = 0;
  for (int r = 0; r < world; ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::string all(total, '\0');
  RETURN_IF_ERROR(Checked(MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                                         MPI_CHAR, comm),
                          "MPI_Allgatherv"));
  std::vector<std::string> out(world);
  for (int r = 0; r < world; ++r) out[r] = all.substr(offsets[r], lengths[r]);
  return out;
}

StatusOr<std::unique_ptr<MpiRuntime>> MpiRuntime::Init(int* argc, char*** argv) {
  int provided = 0;
  SetMpiPhase(MpiPhase::kStarting);
  {
    const CollectiveWatchdog::Scope watched("MPI_Init_thread (every rank's start)");
    RETURN_IF_ERROR(Checked(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread"));
  }
  SetMpiPhase(MpiPhase::kUp);
  std::unique_ptr<MpiRuntime> runtime(new MpiRuntime());
  RETURN_IF_ERROR(Checked(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler"));
  if (provided < MPI_THREAD_SERIALIZED) {
    return FailedPrecondition("this MPI provides thread level " + std::to_string(provided) +
                              ", below MPI_THREAD_SERIALIZED, which the communication thread needs");
  }
  RankInfo& info = runtime->info_;
  RETURN_IF_ERROR(Checked(MPI_Comm_rank(MPI_COMM_WORLD, &info.rank), "MPI_Comm_rank"));
  RETURN_IF_ERROR(Checked(MPI_Comm_size(MPI_COMM_WORLD, &info.world_size), "MPI_Comm_size"));
  MPI_Comm& node = runtime->node_;
  const CollectiveWatchdog::Scope watched("MPI_Comm_split_type (finding each node's ranks)");
  RETURN_IF_ERROR(Checked(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, info.rank, MPI_INFO_NULL, &node),
                          "MPI_Comm_split_type"));
  RETURN_IF_ERROR(Checked(MPI_Comm_set_errhandler(node, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler"));
  RETURN_IF_ERROR(Checked(MPI_Comm_rank(node, &info.local_rank), "MPI_Comm_rank"));
  RETURN_IF_ERROR(Checked(MPI_Comm_size(node, &info.local_size), "MPI_Comm_size"));
  return runtime;
}

MpiRuntime::~MpiRuntime() {
  // A peer that stopped answering would keep MPI_Finalize waiting for ever.
  SetMpiPhase(MpiPhase::kEnding);
  const CollectiveWatchdog::Scope watched("MPI_Finalize (every rank's end)");
  if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);  // unchecked: MPI is finalized next either way
  MPI_Finalize();
}

Status CheckRanksAgree(MPI_Comm comm, const std::vector<std::pair<std::string, std::string>>& settings) {
  for (const auto& [name, value] : settings) {
    ASSIGN_OR_RETURN(std::vector<std::string> values, AllGatherStrings(comm, value, "the ranks' " + name));
    for (size_t r = 1; r < values.size(); ++r) {
      if (values[r] != values[0]) {
        return InvalidArgument("ranks disagree on " + name + ": rank 0 has " + values[0] + ", rank " +
                               std::to_string(r) + " has " + values[r]);
      }
    }
  }
  return Status::Ok();
}

Status AgreeOnStatus(MPI_Comm comm, const Status& local) {
  int world = 0, rank = 0;
  RETURN_IF_ERROR(Checked(MPI_Comm_size(comm, &world), "MPI_Comm_size"));
  RETURN_IF_ERROR(Checked(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank"));
  const int mine = local.ok() ? INT_MAX : rank;
  int first_failed = INT_MAX;
  {
    const CollectiveWatchdog::Scope watched("MPI_Allreduce of every rank's start-up status");
    RETURN_IF_ERROR(Checked(MPI_Allreduce(&mine, &first_failed, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce"));
  }
  if (first_failed == INT_MAX) return Status::Ok();
  // Every rank joins the gather, failed or not.
  ASSIGN_OR_RETURN(std::vector<std::string> messages,
                   AllGatherStrings(comm, local.ok() ? "" : local.message(), "the failed ranks' messages"));
  if (!local.ok()) return local;
  return FailedPrecondition("rank " + std::to_string(first_failed) + " failed: " + messages[first_failed]);
}

}  // namespace ddp
