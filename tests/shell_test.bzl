"""shell_test: a tests/*.sh test that sources tests/lib.sh."""

def shell_test(name, script = None, data = [], size = "medium", tags = ["multi_rank"], **kwargs):
    """An sh_test of SCRIPT.sh (default: NAME.sh) with tests/lib.sh in its data.

    Args:
      name: the test's name.
      script: the script's name without ".sh", where it is not the test's.
      data: what the script runs or reads besides lib.sh.
      size: the test's size.
      tags: the test's tags; most shell tests start ranks under mpirun.
      **kwargs: further sh_test attributes (args).
    """
    native.sh_test(
        name = name,
        size = size,
        srcs = [(script or name) + ".sh"],
        data = ["lib.sh"] + data,
        tags = tags,
        **kwargs
    )
