"""cuda_library: compiles .cu files with nvcc into a cc_library.

With CUDA, each .cu becomes a position-independent object for sm_89 (RTX 4090)
and sm_90 (H100/H200), compiled against the headers of its deps, and linked
into a cc_library that defines DDP_HAVE_CUDA=1 for its dependents. Without
CUDA it is a header-only cc_library without the define, so callers fall back
to CPU-only code.
"""

load("@local_cuda//:defs.bzl", "CUDA_ENABLED", "NVCC")

# The GPU architectures every .cu is compiled for (ddp_train --version
# names them).
CUDA_ARCHS = ["89", "90"]

CUDA_ARCH_FLAGS = ["-gencode=arch=compute_%s,code=sm_%s" % (arch, arch) for arch in CUDA_ARCHS]

NVCC_FLAGS = [
    "-O3",
    "-std=c++17",
    "--extended-lambda",
    "-Xcompiler=-fPIC",
    # EDG flags `status = Call()` as discarding a [[nodiscard]] Status (the
    # reference operator= returns); GCC does not, and nothing is discarded.
    "--diag-suppress=2810",
]

def _cuda_objects_impl(ctx):
    compilation = [dep[CcInfo].compilation_context for dep in ctx.attr.deps]
    headers = depset(ctx.files.hdrs, transitive = [c.headers for c in compilation])
    include_dirs = depset(
        [".", ctx.bin_dir.path],
        transitive = [c.includes for c in compilation] +
                     [c.quote_includes for c in compilation] +
                     [c.system_includes for c in compilation],
    )
    defines = depset(transitive = [c.defines for c in compilation])
    objects = []
    for src in ctx.files.srcs:
        obj = ctx.actions.declare_file(ctx.label.name + "/" + src.basename.replace(".cu", ".pic.o"))
        args = ctx.actions.args()
        args.add_all(NVCC_FLAGS + CUDA_ARCH_FLAGS + ctx.attr.copts)
        args.add_all(include_dirs, format_each = "-I%s")
        args.add_all(defines, format_each = "-D%s")
        args.add("-c", src.path)
        args.add("-o", obj.path)
        ctx.actions.run(
            executable = NVCC,
            arguments = [args],
            inputs = depset([src], transitive = [headers]),
            outputs = [obj],
            mnemonic = "NvccCompile",
            progress_message = "nvcc %s" % src.short_path,
            use_default_shell_env = True,
        )
        objects.append(obj)
    return [DefaultInfo(files = depset(objects))]

_cuda_objects = rule(
    implementation = _cuda_objects_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = True),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(),
    },
)

def cuda_library(name, srcs, hdrs = [], deps = [], copts = [], **kwargs):
    if not CUDA_ENABLED:
        native.cc_library(name = name, hdrs = hdrs, deps = deps, **kwargs)
        return

    _cuda_objects(
        name = name + "_nvcc",
        srcs = srcs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cudart"],
        copts = copts,
    )
    native.cc_library(
        name = name,
        srcs = [":" + name + "_nvcc"],
        hdrs = hdrs,
        defines = ["DDP_HAVE_CUDA=1"],
        deps = deps + ["@local_cuda//:cudart"],
        **kwargs
    )
