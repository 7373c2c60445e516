#!/usr/bin/env python3
"""Compares two ddp_train metrics files (JSON lines): the per-step losses,
within a relative tolerance (0: exactly equal), and the evaluation
accuracies (during training and in the summary), which must be equal.
Exits non-zero when they differ, when either run has no loss, when the runs
have different step counts, or when --steps is given and does not match.

With --resumed, B is a run resumed from a checkpoint: its steps are
compared with A's steps of the same numbers.

usage: compare_losses.py A.jsonl B.jsonl [--rtol R] [--steps N] [--resumed]
"""
import argparse
import json
import sys


def records(path):
    return [json.loads(line) for line in open(path)]


def losses(rs):
    return [r["loss"] for r in rs if "loss" in r]


def accuracies(rs):
    during = [r["eval_accuracy"] for r in rs if "eval_accuracy" in r]
    summary = [r["summary"]["eval_accuracy"] for r in rs if "eval_accuracy" in r.get("summary", {})]
    return during + summary


def main():
    p = argparse.ArgumentParser()
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--rtol", type=float, default=0.0)
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--resumed", action="store_true")
    args = p.parse_args()
    ra, rb = records(args.a), records(args.b)
    if args.resumed:
        steps = {r["step"] for r in rb if "step" in r}
        # Both runs end at the same step: their summaries compare too.
        ra = [r for r in ra if r.get("step") in steps or "summary" in r]
        print(f"steps {sorted(steps)}")
    a, b = losses(ra), losses(rb)
    worst = max((abs(x - y) / abs(x) if x != 0 else abs(y) for x, y in zip(a, b)), default=0.0)
    print(f"losses {a} vs {b}: worst relative difference {worst:.3g}")
    ea, eb = accuracies(ra), accuracies(rb)
    if ea or eb:
        print(f"eval accuracies {ea} vs {eb}")
    ok = len(a) == len(b) >= 1 and (args.steps == 0 or len(a) == args.steps) and worst <= args.rtol and ea == eb
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
