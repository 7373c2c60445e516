"""Finds the local CUDA toolkit and exposes it as @local_cuda.

nvcc is looked up on PATH, then at /usr/local/cuda/bin/nvcc. When neither
exists, or DDP_CUDA=0 is set (e.g. `--repo_env=DDP_CUDA=0`), the repository
still exists but is empty and `CUDA_ENABLED` is False, so CPU-only builds stay
green.

@local_cuda//:defs.bzl exports CUDA_ENABLED, NVCC and CUDA_HOME.
@local_cuda//:cudart, :cudnn, :cublaslt and :nccl are cc_library targets.
"""

_LIBS = {
    "cudart": "cudart",
    "cudnn": "cudnn",
    "cublaslt": "cublasLt",
    "nccl": "nccl",
}

def _find_nvcc(ctx):
    if ctx.os.environ.get("DDP_CUDA", "1") == "0":
        return None
    nvcc = ctx.which("nvcc")
    if nvcc != None:
        return nvcc
    fallback = ctx.path("/usr/local/cuda/bin/nvcc")
    if fallback.exists:
        return fallback
    return None

def _cuda_configure_impl(ctx):
    nvcc = _find_nvcc(ctx)
    build = ['package(default_visibility = ["//visibility:public"])', ""]
    if nvcc == None:
        ctx.file("defs.bzl", "CUDA_ENABLED = False\nNVCC = \"\"\nCUDA_HOME = \"\"\n")
        for name in _LIBS:
            build.append('cc_library(name = "%s")' % name)
        ctx.file("BUILD", "\n".join(build) + "\n")
        return

    home = nvcc.dirname.dirname
    ctx.symlink(str(home) + "/include", "include")
    ctx.file("defs.bzl", 'CUDA_ENABLED = True\nNVCC = "%s"\nCUDA_HOME = "%s"\n' % (nvcc, home))
    lib_dir = str(home) + "/lib64"
    for name, lib in _LIBS.items():
        build.append("""cc_library(
    name = "{name}",
    hdrs = glob(["include/*.h"]),
    includes = ["include"],
    linkopts = ["-L{lib_dir}", "-Wl,-rpath,{lib_dir}", "-l{lib}"],
)
""".format(name = name, lib = lib, lib_dir = lib_dir))
    ctx.file("BUILD", "\n".join(build) + "\n")

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["PATH", "DDP_CUDA"],
    local = True,
)
