"""The self-test's harness (tools/gpu/bundle/selftest.py runs the tiers): running
commands under a shared budget, the checks a tier is made of, and the
report, rewritten after every tier so a run cut short still says what it
found. The GPU run and its CPU rehearsal share every line of it.

A check is passed, failed, or skipped with a reason. A tier passes when at
least one of its checks passed and none failed: a tier that compared
nothing has not passed. Skipped without a failure, it is skipped, with its
checks' reasons. The verdict: failed when any tier failed; incomplete when
none failed but a tier was cut by the budget or left out (--only); passed
otherwise. A check skipped for the budget (a benchmark row the tier's limit
left no time for) makes the verdict incomplete too.
"""
import json
import os
import signal
import subprocess
import time


class Check:
    def __init__(self, name, status, detail=""):
        assert status in ("passed", "failed", "skipped"), status
        self.name, self.status, self.detail = name, status, detail

    def as_json(self):
        return {"name": self.name, "status": self.status, "detail": self.detail}


class Tier:
    """What a tier function gets: a place for its checks and its deadline."""

    def __init__(self, run, name, limit_s):
        self.run, self.name, self.limit_s = run, name, limit_s
        self.start = time.monotonic()
        self.deadline = self.start + limit_s
        self.checks = []
        self.notes = []

    def check(self, name, ok, detail=""):
        """A comparison's outcome: passed when `ok`, else failed."""
        self.checks.append(Check(name, "passed" if ok else "failed", detail))
        self.run.say(f"  {'ok' if ok else 'FAILED'}: {name}{': ' + detail if detail else ''}")
        return ok

    def skip(self, name, reason):
        self.checks.append(Check(name, "skipped", reason))
        self.run.say(f"  skipped: {name}: {reason}")

    def note(self, text):
        self.notes.append(text)
        self.run.say(f"  note: {text}")

    def left(self):
        return self.deadline - time.monotonic()

    def status(self):
        states = [c.status for c in self.checks]
        if "failed" in states:
            return "failed"
        if "passed" in states:
            return "passed"
        return "skipped"


class Result:
    """One finished command."""

    def __init__(self, argv, rc, out, err, seconds, timed_out):
        self.argv, self.rc, self.out, self.err = argv, rc, out, err
        self.seconds, self.timed_out = seconds, timed_out

    def lines(self, stream="err"):
        return [l for l in (self.err if stream == "err" else self.out).splitlines() if l.strip()]

    def describe(self):
        if self.timed_out:
            return f"timed out after {self.seconds:.0f} s"
        return f"exit {self.rc} after {self.seconds:.1f} s"


class Run:
    """A self-test run: where it writes, what is left of its budget, and
    which tiers have reported."""

    def __init__(self, out_dir, device_name, rehearsal, budget_s, bundle_version, inject):
        self.out = out_dir
        self.device_name, self.rehearsal = device_name, rehearsal
        self.budget_s = budget_s
        self.start = time.monotonic()
        self.deadline = self.start + budget_s
        self.version = bundle_version
        self.inject = inject
        self.tiers = []  # dicts, as reported
        self.header = {}
        os.makedirs(out_dir, exist_ok=True)
        self.log = open(os.path.join(out_dir, "selftest.log"), "w")

    # ------------------------------------------------------------ output
    def say(self, text):
        print(text, flush=True)
        self.log.write(text + "\n")
        self.log.flush()

    def path(self, name):
        return os.path.join(self.out, name)

    # ---------------------------------------------------------- commands
    def command(self, tier, argv, limit_s, env=None, name=None):
        """Runs argv (a list) with a time limit: its own, cut to what is left of
        the tier's limit. Output is kept on the Result and in selftest.log.
        A command the tier's deadline cut is timed out, as any other."""
        timeout = max(1.0, min(limit_s, tier.left()))
        full_env = dict(os.environ)
        full_env.update(env or {})
        shown = " ".join(f"{k}={v}" for k, v in (env or {}).items())
        self.log.write(f"$ {shown + ' ' if shown else ''}{' '.join(argv)}\n")
        self.log.flush()
        start = time.monotonic()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env,
                                start_new_session=True, text=True, errors="replace")
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)  # mpirun's ranks too
            out, err = proc.communicate()
        seconds = time.monotonic() - start
        self.log.write(out + err)
        self.log.write(f"# {name or os.path.basename(argv[0])}: "
                       f"{'timed out' if timed_out else 'exit %d' % proc.returncode} after {seconds:.1f} s\n")
        self.log.flush()
        return Result(argv, proc.returncode, out, err, seconds, timed_out)

    # ------------------------------------------------------------- tiers
    def tier(self, name, limit_s, function, selected=True):
        """Runs one tier when it is selected and its limit fits in what is left
        of the budget; reports it either way."""
        left = self.deadline - time.monotonic()
        if not selected:
            self.report_tier(name, "skipped", 0.0, limit_s, [], [], "not selected (--only)")
            return
        if left < limit_s:
            self.report_tier(name, "skipped", 0.0, limit_s, [], [],
                             f"budget: {left:.0f} s left of {self.budget_s:.0f}, the tier needs {limit_s:.0f}")
            return
        self.say(f"selftest: tier {name} (limit {limit_s:.0f} s)")
        t = Tier(self, name, limit_s)
        if name in self.inject:
            t.note("a failure is injected into this tier (DDP_SELFTEST_INJECT)")
        try:
            function(t)
        except Exception as e:  # a defect of the self-test itself: the tier fails, the run goes on
            t.check("the tier's own code", False, f"{type(e).__name__}: {e}")
        seconds = time.monotonic() - t.start
        status = t.status()
        reason = "; ".join(c.detail for c in t.checks if c.status == "skipped") if status == "skipped" else ""
        self.report_tier(name, status, seconds, limit_s, t.checks, t.notes, reason)

    def report_tier(self, name, status, seconds, limit_s, checks, notes, reason, quiet=False):
        self.tiers.append({"tier": name, "status": status, "seconds": round(seconds, 1), "limit_s": limit_s,
                           "reason": reason, "notes": notes, "checks": [c.as_json() for c in checks]})
        if not quiet:
            self.say(f"selftest: tier {name}: {status}{' (' + reason + ')' if reason else ''} ({seconds:.0f} s)")
        self.write_report()

    def verdict(self):
        states = [t["status"] for t in self.tiers]
        if "failed" in states:
            return "failed"
        cut = [t for t in self.tiers
               if (t["status"] == "skipped" and t["reason"].startswith(("budget", "not selected"))) or
               any(c["status"] == "skipped" and c["detail"].startswith("budget") for c in t["checks"])]
        if cut or "passed" not in states:
            return "incomplete"
        return "passed"

    def write_report(self):
        verdict = self.verdict()
        report = {"bundle": self.version, "device": self.device_name, "rehearsal": self.rehearsal,
                  "verdict": verdict, "passed": verdict == "passed", "budget_s": self.budget_s,
                  "seconds": round(time.monotonic() - self.start, 1), "inject": sorted(self.inject)}
        report.update(self.header)
        report["tiers"] = self.tiers
        with open(self.path("report.json.tmp"), "w") as f:
            json.dump(report, f, indent=1)
        os.replace(self.path("report.json.tmp"), self.path("report.json"))
        md = [f"# ddp_train self-test{' (CPU rehearsal)' if self.rehearsal else ''}", "",
              f"bundle {self.version}, device {self.device_name}: **{verdict}** "
              f"in {report['seconds']:.0f} s of a {self.budget_s:.0f} s budget", ""]
        for key, value in self.header.items():
            md.append(f"- {key}: `{json.dumps(value)}`")
        md += ["", "| tier | status | seconds | limit |", "|---|---|---|---|"]
        for t in self.tiers:
            md.append(f"| {t['tier']} | {t['status']}{': ' + t['reason'] if t['reason'] else ''} | "
                      f"{t['seconds']:.0f} | {t['limit_s']:.0f} |")
        for t in self.tiers:
            if not t["checks"] and not t["notes"]:
                continue
            md += ["", f"## {t['tier']}: {t['status']}", ""]
            md += [f"- {c['status']}: {c['name']}{': ' + c['detail'] if c['detail'] else ''}" for c in t["checks"]]
            md += [f"- note: {n}" for n in t["notes"]]
        with open(self.path("report.md.tmp"), "w") as f:
            f.write("\n".join(md) + "\n")
        os.replace(self.path("report.md.tmp"), self.path("report.md"))


# ---------------------------------------------------------------- parsing
def records(path):
    """A metrics file's records; [] when it is missing or unreadable."""
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError):
        return []


def summary(path):
    """The metrics file's summary record, or None."""
    found = [r["summary"] for r in records(path) if "summary" in r]
    return found[-1] if found else None


def steps(path):
    return [r for r in records(path) if "step" in r and "loss" in r]


def key_values(text):
    """'key value' lines (what the peers print) as a dict of floats."""
    values = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                values[parts[0]] = float(parts[1])
            except ValueError:
                pass
    return values


def gtest_counts(xml_path, vacuous_reasons):
    """Counts of a gtest XML report: passed, failed (by name), and skipped with
    their reasons. A skip whose reason matches one of `vacuous_reasons` (on a
    GPU machine: "no CUDA device visible") counts as a failure: that case
    compared nothing where it should have run."""
    import xml.etree.ElementTree as ET
    counts = {"passed": 0, "failed": 0, "skipped": 0, "failures": [], "skip_reasons": {}}
    try:
        root = ET.parse(xml_path).getroot()
    except (OSError, ET.ParseError) as e:
        counts["error"] = f"{xml_path}: {e}"
        return counts
    for case in root.iter("testcase"):
        name = f"{case.get('classname')}.{case.get('name')}"
        failure = case.find("failure")
        skipped = case.find("skipped")
        if failure is not None:
            counts["failed"] += 1
            counts["failures"].append(name)
        elif skipped is not None or case.get("result") == "skipped":
            reason = (skipped.get("message", "") if skipped is not None else "").splitlines()
            reason = reason[-1].strip() if reason else ""
            if not reason or any(v in reason for v in vacuous_reasons):
                counts["failed"] += 1
                counts["failures"].append(f"{name} (skipped: {reason or 'no reason given'})")
            else:
                counts["skipped"] += 1
                counts["skip_reasons"][reason] = counts["skip_reasons"].get(reason, 0) + 1
        else:
            counts["passed"] += 1
    return counts
