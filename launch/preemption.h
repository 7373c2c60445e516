// Preemption: SIGUSR1 (mpirun forwards it; Slurm's --signal=USR1@T) or
// SIGTERM (Slurm sends it to every task, then SIGKILL KillWait seconds
// later, 30 by default) asks the run to stop. The handler only records the
// signal; the trainer reads it at each step's reduction, so every rank
// stops at the same step boundary, writes a checkpoint (with
// --checkpoint-dir) and exits with kPreemptedExitCode.
#pragma once

namespace ddp {

// EX_TEMPFAIL (sysexits.h): the job did not finish and may be run again,
// with --resume, to continue.
constexpr int kPreemptedExitCode = 75;

// Installs the handlers for SIGUSR1 and SIGTERM.
void InstallPreemptionHandlers();
// The signal received (SIGUSR1 or SIGTERM), or 0.
int PreemptionSignal();
// "SIGUSR1", "SIGTERM" or "a signal".
const char* PreemptionSignalName(int signal);

}  // namespace ddp
