# Sourced by the bundle's wrappers (B is the bundle's root): where its
# programs find their libraries, Open MPI's relocated runtime, and the CUDA
# libraries left to the host. Computed once per process tree.
if [ -z "${DDP_BUNDLE_LIBRARY_PATH:-}" ]; then
  cuda_dirs=""
  add_dir() { [ -d "$1" ] && cuda_dirs="$cuda_dirs:$1"; }
  # 1. Given explicitly.
  for d in $(printf '%s' "${DDP_CUDA_LIBS:-}" | tr ':' ' '); do add_dir "$d"; done
  # 2. A pip-installed PyTorch's nvidia/*/lib (cuDNN, cuBLAS, NCCL, runtime).
  # The interpreter the self-test runs (DDP_SELFTEST_PYTHON), else python3.
  ddp_py=${DDP_SELFTEST_PYTHON:-python3}
  if command -v "$ddp_py" >/dev/null 2>&1; then
    for d in $("$ddp_py" -c 'import glob, os, nvidia
for root in nvidia.__path__:
    print(" ".join(sorted(glob.glob(os.path.join(root, "*", "lib")))))' 2>/dev/null); do
      add_dir "$d"
    done
  fi
  # 3. The CUDA toolkit.
  for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" "${CUDA_HOME:-/usr/local/cuda}/targets/x86_64-linux/lib"; do
    add_dir "$d"
  done
  # The driver's libcuda.so.1: where the host's loader knows it, or the
  # usual container mount.
  for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /lib/x86_64-linux-gnu; do
    [ -e "$d/libcuda.so.1" ] && cuda_dirs="$cuda_dirs:$d"
  done
  DDP_BUNDLE_LIBRARY_PATH="$B/lib:$B/lib/x86_64-linux-gnu/openmpi/lib:$B/lib/x86_64-linux-gnu/pmix2/lib$cuda_dirs"
  export DDP_BUNDLE_LIBRARY_PATH
  # Open MPI and PMIx relocated to the bundle.
  export OPAL_PREFIX="$B"
  export OMPI_MCA_mca_base_component_path="$B/lib/x86_64-linux-gnu/openmpi/lib/openmpi3"
  # PMIx finds its plugins under its install directories, each relocated by
  # its own variable: else it loads a host's PMIx plugins from the path
  # compiled in (another version, built for another glibc).
  ddp_pmix="$B/lib/x86_64-linux-gnu/pmix2"
  export PMIX_MCA_mca_base_component_path="$ddp_pmix/lib/pmix"
  export PMIX_PREFIX="$ddp_pmix" PMIX_EXEC_PREFIX="$ddp_pmix" PMIX_LIBDIR="$ddp_pmix/lib"
  export PMIX_PKGLIBDIR="$ddp_pmix/lib/pmix" PMIX_DATADIR="$ddp_pmix/share" PMIX_PKGDATADIR="$ddp_pmix/share/pmix"
  export PMIX_SYSCONFDIR="$ddp_pmix/etc"
  # hwloc's plugins: the bundle's (PCI), not a host's.
  export HWLOC_PLUGINS_PATH="$B/lib/x86_64-linux-gnu/hwloc"
  export OPAL_BINDIR="$B/bin" OPAL_LIBDIR="$B/lib/x86_64-linux-gnu/openmpi/lib"
  export OPAL_PKGDATADIR="$B/share/openmpi" OPAL_SYSCONFDIR="$B/etc/openmpi"
  export OPAL_PKGLIBDIR="$B/lib/x86_64-linux-gnu/openmpi/lib/openmpi3"
  # One machine: no ssh to find, no single-copy kernel support to count on
  # (containers, gVisor), and root is fine.
  export OMPI_MCA_plm_rsh_agent="${OMPI_MCA_plm_rsh_agent:-false}"
  export OMPI_MCA_btl_vader_single_copy_mechanism="${OMPI_MCA_btl_vader_single_copy_mechanism:-none}"
  export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # Ranks of one machine talk through shared memory: no UCX or network
  # transports probed (they may hang or warn in containers).
  export OMPI_MCA_pml="${OMPI_MCA_pml:-ob1}" OMPI_MCA_btl="${OMPI_MCA_btl:-self,vader}"
  export PATH="$B/bin:$PATH"
fi
