// main() for gtest programs that run under mpirun: MPI starts first, only
// rank 0 writes the JUnit XML that Bazel reads, every rank reports its own
// failures, and the program fails if any rank failed.
#include <mpi.h>

#include <gtest/gtest.h>

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return 1;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    // InitGoogleTest already installed the XML/JSON writer (from
    // XML_OUTPUT_FILE or --gtest_output): clearing the flag now is too late.
    // Remove the writer, or every rank writes the same file at once and a
    // shorter report can land over a longer one, leaving junk behind it.
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_xml_generator());
  }
  const int failed = RUN_ALL_TESTS();
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed;
}
