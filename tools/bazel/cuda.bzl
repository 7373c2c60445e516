"""cuda_library: compiles .cu files with nvcc into a cc_library.

With CUDA, each .cu becomes a position-independent object for sm_89 (RTX 4090)
and sm_90 (H100/H200), linked into a cc_library that also defines
DDP_HAVE_CUDA=1 for its dependents. Without CUDA it is a header-only
cc_library and the define is absent, so callers fall back to CPU-only code.
"""

load("@local_cuda//:defs.bzl", "CUDA_ENABLED", "NVCC")

CUDA_ARCH_FLAGS = [
    "-gencode=arch=compute_89,code=sm_89",
    "-gencode=arch=compute_90,code=sm_90",
]

def cuda_library(name, srcs, hdrs = [], deps = [], copts = [], **kwargs):
    if not CUDA_ENABLED:
        native.cc_library(name = name, hdrs = hdrs, deps = deps, **kwargs)
        return

    objects = []
    for src in srcs:
        obj = name + "_" + src.replace("/", "_").replace(".cu", ".pic.o")
        native.genrule(
            name = obj + "_nvcc",
            srcs = [src] + hdrs,
            outs = [obj],
            cmd = " ".join([
                NVCC,
                "-c",
                "-O3",
                "-std=c++17",
                "-Xcompiler=-fPIC",
                "-I.",
                "-I$(GENDIR)",
            ] + CUDA_ARCH_FLAGS + copts + [
                "-o $@",
                "$(location %s)" % src,
            ]),
            message = "nvcc " + src,
        )
        objects.append(obj)

    native.cc_library(
        name = name,
        srcs = objects,
        hdrs = hdrs,
        defines = ["DDP_HAVE_CUDA=1"],
        deps = deps + ["@local_cuda//:cudart"],
        **kwargs
    )
