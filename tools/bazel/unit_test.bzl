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

def gpu_test(name, deps = [], size = "small"):
    """GPU test cases, each skipping without a GPU (DDP_SKIP_WITHOUT_GPU).

    The cases are a library, `<name without _test>_cases`, linked both into
    the unit_test `name` (tag gpu) and into //tests:gpu_tests, the self-test
    bundle's one binary, which lists it.

    Args:
      name: the test's name, ending in _test; its source is `<name>.cc`.
      deps: what the cases use; googletest, the CUDA runtime's wrapper and
        runtime/testing:gpu_testing are added.
      size: the test's size.
    """
    cases = name[:-len("_test")] + "_cases"
    native.cc_library(
        name = cases,
        testonly = 1,
        srcs = [name + ".cc"],
        alwayslink = 1,
        deps = deps + [
            "//runtime/cuda:cuda_device",
            "//runtime/testing:gpu_testing",
            "@system//:gtest",
        ],
    )
    unit_test(
        name = name,
        size = size,
        srcs = [],
        tags = ["gpu"],
        deps = [":" + cases],
    )
