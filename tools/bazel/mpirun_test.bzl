"""mpirun_test: a test program run on several ranks under a real mpirun."""

def mpirun_test(name, program, np, tags = [], size = "medium", **kwargs):
    """An sh_test that runs `program` under //tests:mpirun_test.sh.

    The OMPI_* variables that root and oversubscription need come from
    .bazelrc's --test_env.

    Args:
      name: the test's name.
      program: the label of the test program (a testonly cc_binary).
      np: the number of ranks.
      tags: tags besides "multi_rank", which every such test carries (e.g.
        "gpu" for one that needs a GPU a rank).
      size: the test's size.
      **kwargs: further sh_test attributes.
    """
    native.sh_test(
        name = name,
        size = size,
        srcs = ["//tests:mpirun_test.sh"],
        args = [
            str(np),
            "$(location %s)" % program,
        ],
        data = [program],
        tags = sorted(tags + ["multi_rank"]),
        **kwargs
    )

def mpi_gtest(name, nps, deps = [], srcs = None, size = "medium", tags = []):
    """A googletest program run under mpirun at each rank count in `nps`.

    The program is `name` (a testonly cc_binary over //tests:mpi_gtest_main,
    MPI-initialized, so it also runs alone); the tests are
    `<name without _test>_np<N>_test`.

    Args:
      name: the program's name, ending in _test.
      nps: the rank counts, one mpirun_test each.
      deps: what the program uses; mpi_gtest_main is added.
      srcs: its sources; by default the one file `<name>.cc`.
      size: each test's size.
      tags: each test's tags besides "multi_rank".
    """
    native.cc_binary(
        name = name,
        testonly = 1,
        srcs = [name + ".cc"] if srcs == None else srcs,
        deps = deps + ["//tests:mpi_gtest_main"],
    )
    for np in nps:
        mpirun_test(
            name = "%s_np%d_test" % (name[:-len("_test")], np),
            size = size,
            np = np,
            program = ":" + name,
            tags = tags,
        )
