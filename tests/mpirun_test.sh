#!/usr/bin/env bash
# Runs a test program under a real mpirun: mpirun_test.sh NP PROGRAM [ARGS...]
# The OMPI_* variables that root and oversubscription need come from
# .bazelrc's --test_env.
set -u
np="$1"; shift
exec mpirun -np "$np" --oversubscribe --bind-to none "$@"
