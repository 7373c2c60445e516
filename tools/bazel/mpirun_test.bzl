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
