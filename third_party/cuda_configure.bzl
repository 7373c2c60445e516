"""Finds the local CUDA toolkit and exposes it as @local_cuda.

nvcc is looked up in $CUDA_HOME/bin, then on PATH, then at
/usr/local/cuda/bin/nvcc. When none exists, or DDP_CUDA=0 is set (e.g.
`--repo_env=DDP_CUDA=0`), the repository still exists but is empty and
`CUDA_ENABLED` is False, so CPU-only builds stay green.

The nvcc found first may be a wrapper script (e.g. /usr/local/bin/nvcc that
execs the real one), so the toolkit root is what nvcc itself reports as TOP
in a dry run, not the directory above the wrapper. Headers and libraries are
then looked up in the toolkit's include/lib directories (lib64, or
targets/x86_64-linux/lib), and in Debian's multiarch directories for cuDNN and
NCCL installed from packages. A toolkit whose cudart, cuDNN, cuBLASLt or NCCL
is missing fails the build with one line naming the missing file.

@local_cuda//:defs.bzl exports CUDA_ENABLED, NVCC and CUDA_HOME.
@local_cuda//:cudart, :cudnn, :cublaslt and :nccl are cc_library targets.
"""

# target name -> (library name for -l, a header it needs)
_LIBS = {
    "cudart": ("cudart", "cuda_runtime.h"),
    "cudnn": ("cudnn", "cudnn.h"),
    "cublaslt": ("cublasLt", "cublasLt.h"),
    "nccl": ("nccl", "nccl.h"),
}

_SYSTEM_LIB_DIRS = ["/usr/lib/x86_64-linux-gnu", "/usr/lib64"]
_SYSTEM_INCLUDE_DIRS = ["/usr/include", "/usr/include/x86_64-linux-gnu"]

def _find_nvcc(ctx):
    if ctx.os.environ.get("DDP_CUDA", "1") == "0":
        return None
    cuda_home = ctx.os.environ.get("CUDA_HOME", "")
    if cuda_home:
        candidate = ctx.path(cuda_home + "/bin/nvcc")
        if candidate.exists:
            return candidate
    nvcc = ctx.which("nvcc")
    if nvcc != None:
        return nvcc
    fallback = ctx.path("/usr/local/cuda/bin/nvcc")
    if fallback.exists:
        return fallback
    return None

def _toolkit_root(ctx, nvcc):
    """The toolkit directory nvcc compiles against (it may be a wrapper)."""
    result = ctx.execute(
        [nvcc, "-dryrun", "-x", "cu", "-c", "/dev/null", "-o", "/dev/null"],
        timeout = 60,
    )
    for line in (result.stdout + "\n" + result.stderr).splitlines():
        marker = "TOP="
        at = line.find(marker)
        if at >= 0:
            top = line[at + len(marker):].strip().strip('"')
            path = ctx.path(top)
            if path.exists:
                return ctx.path(str(path.realpath))
    return nvcc.realpath.dirname.dirname

def _first_with(ctx, dirs, filename):
    for d in dirs:
        if ctx.path(d + "/" + filename).exists:
            return d
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

    home = str(_toolkit_root(ctx, nvcc))
    real_nvcc = ctx.path(home + "/bin/nvcc")
    if not real_nvcc.exists:
        real_nvcc = nvcc
    include_dirs = [home + "/include", home + "/targets/x86_64-linux/include"] + _SYSTEM_INCLUDE_DIRS
    lib_dirs = [home + "/lib64", home + "/targets/x86_64-linux/lib", home + "/lib"] + _SYSTEM_LIB_DIRS

    # Every header directory that holds one of the needed headers is linked
    # into the repository (include0, include1, ...), toolkit first.
    linked = {}
    for name, (lib, header) in _LIBS.items():
        inc = _first_with(ctx, include_dirs, header)
        if inc == None:
            fail("CUDA toolkit at %s (nvcc %s): header %s not found in %s; build with --config=nocuda for a CPU-only build" % (home, nvcc, header, ", ".join(include_dirs)))
        if inc not in linked:
            linked[inc] = "include%d" % len(linked)
            ctx.symlink(inc, linked[inc])
        libdir = _first_with(ctx, lib_dirs, "lib%s.so" % lib)
        if libdir == None:
            fail("CUDA toolkit at %s (nvcc %s): lib%s.so not found in %s; build with --config=nocuda for a CPU-only build" % (home, nvcc, lib, ", ".join(lib_dirs)))
        build.append("""cc_library(
    name = "{name}",
    hdrs = glob(["{inc}/*.h", "{inc}/*.hpp", "{inc}/crt/*", "{inc}/nv/**"]),
    includes = ["{inc}"],
    linkopts = ["-L{libdir}", "-Wl,-rpath,{libdir}", "-l{lib}"],
)
""".format(name = name, inc = linked[inc], lib = lib, libdir = libdir))
    ctx.file("defs.bzl", 'CUDA_ENABLED = True\nNVCC = "%s"\nCUDA_HOME = "%s"\n' % (real_nvcc, home))
    ctx.file("BUILD", "\n".join(build) + "\n")

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["PATH", "DDP_CUDA", "CUDA_HOME"],
    local = True,
)
