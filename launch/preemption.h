// Preemption: SIGUSR1 (mpirun forwards it; Slurm's --signal=USR1@T) or
// SIGTERM (Slurm sends it to every task, then SIGKILL KillWait seconds
// later, 30 by default) asks the run to stop. The handler only records the
// signal; the trainer reads it at each step's reduction, so every rank
// stops at the same step boundary, writes a checkpoint (with
// --checkpoint-dir) and exits with kPreemptedExitCode.
//
// A stop is not deferred without limit. A second signal, or no step
// boundary within the grace (--preemption-grace-s) of the first, ends the
// rank at once with one line and exit 1, without a checkpoint of the step
// in progress: the last committed one stands (checkpoints are atomic).
#pragma once

#include <functional>
#include <string>

namespace ddp {

// EX_TEMPFAIL (sysexits.h): the job did not finish and may be run again,
// with --resume, to continue.
constexpr int kPreemptedExitCode = 75;

// Installs the handlers for SIGUSR1 and SIGTERM. `line_prefix` starts the
// line a second signal prints ("ddp_train: rank 1: error: "); that line is
// written from the handler, which then ends the process (_exit(1)).
// `grace_s` > 0: a thread calls `on_grace_expired` with the line to print
// when the first signal is that old and MarkPreemptionAnswered has not been
// called; it must not return. 0: no limit.
void InstallPreemptionHandlers(const std::string& line_prefix, double grace_s,
                               std::function<void(const std::string&)> on_grace_expired);
// The run has stopped training (the step boundary a signal asked for, or
// the run's end): the grace no longer applies. A second signal still ends
// the process.
void MarkPreemptionAnswered();
// The signal received (SIGUSR1 or SIGTERM), or 0.
int PreemptionSignal();
// "SIGUSR1", "SIGTERM" or "a signal".
const char* PreemptionSignalName(int signal);

// The grace's line: "SIGTERM came 30 s ago and the step in progress has not
// ended (--preemption-grace-s 30): ending now, without its checkpoint".
std::string GraceExpiredLine(int signal, double grace_s);

}  // namespace ddp
