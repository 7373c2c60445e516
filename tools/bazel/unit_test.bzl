"""unit_test: a googletest program, run by gtest_main."""

def unit_test(name, deps = [], srcs = None, size = "small", **kwargs):
    """A cc_test over gtest_main.

    Args:
      name: the test's name.
      deps: what the test uses; gtest_main is added.
      srcs: the test's sources; by default the one file `<name>.cc`. A test
        whose cases live in a testonly library (one the GPU bundle also
        links) passes [].
      size: the test's size.
      **kwargs: further cc_test attributes (data, tags, ...).
    """
    native.cc_test(
        name = name,
        size = size,
        srcs = [name + ".cc"] if srcs == None else srcs,
        deps = deps + ["@system//:gtest_main"],
        **kwargs
    )
