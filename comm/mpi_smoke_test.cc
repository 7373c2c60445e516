// Proves the Open MPI mapping end to end under a real `mpirun`: thread
// support, rank discovery, the node-local split, and an all-reduce whose sum
// is known exactly. Run by tests/mpirun_test.sh with several ranks.
#include <mpi.h>

#include <cstdio>
#include <vector>

namespace {

int failures = 0;

void Expect(bool ok, int rank, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what);
    ++failures;
  }
}

#define MPI_OK(call) Expect((call) == MPI_SUCCESS, rank, #call)

}  // namespace

int main(int argc, char** argv) {
  int provided = 0, rank = -1, world = 0, local_rank = -1, local_size = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "MPI_Init_thread failed\n");
    return 1;
  }
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &world));
  Expect(provided == MPI_THREAD_MULTIPLE, rank, "MPI_THREAD_MULTIPLE is provided");
  MPI_Comm local;
  MPI_OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local));
  MPI_OK(MPI_Comm_rank(local, &local_rank));
  MPI_OK(MPI_Comm_size(local, &local_size));
  Expect(local_size == world && local_rank == rank, rank, "one node: local ranks equal world ranks");

  // 1,000,003 floats: element i on rank r holds (r + 1) * (i % 1000); the sum
  // over ranks is (i % 1000) * world * (world + 1) / 2, exact in float.
  const int n = 1000003;
  std::vector<float> data(n), sum(n);
  for (int i = 0; i < n; ++i) data[i] = static_cast<float>((rank + 1) * (i % 1000));
  MPI_OK(MPI_Allreduce(data.data(), sum.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
  int wrong = 0;
  for (int i = 0; i < n; ++i) wrong += sum[i] != static_cast<float>((i % 1000) * world * (world + 1) / 2);
  Expect(wrong == 0, rank, "all-reduce sums are exact");

  MPI_Comm_free(&local);
  int all_failures = 0;
  MPI_Allreduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("%d ranks: %s\n", world, all_failures == 0 ? "all checks passed" : "FAILED");
  MPI_Finalize();
  return all_failures == 0 ? 0 : 1;
}
