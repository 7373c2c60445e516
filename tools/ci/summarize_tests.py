#!/usr/bin/env python3
"""Counts test cases in the JUnit XML that `bazel test` left for each target.

usage: summarize_tests.py //pkg:target ...

Prints the failed cases by name, the skipped ones (CUDA tests on a machine
without a GPU), and a closing line "tests: N passed, N failed, N skipped"
over every gtest case (a shell test counts as one case). A target whose
test.xml is missing, unreadable or holds no case counts as one failure. It
never stops with a traceback: whatever goes wrong reading one target is
that target's failure.
"""
import os
import sys
import xml.etree.ElementTree as ET


def xml_path(label):
    package, _, name = label.lstrip("/").partition(":")
    return os.path.join("bazel-testlogs", package, name, "test.xml")


def main(labels):
    passed = failed = skipped = 0
    skipped_names, failed_names, missing = [], [], []
    for label in labels:
        path = xml_path(label)
        if not os.path.exists(path):
            missing.append(f"{label} (did not build or run)")
            continue
        try:
            cases = list(ET.parse(path).getroot().iter("testcase"))
        except Exception as e:  # ParseError, OSError, anything: the target failed
            missing.append(f"{label} (its {path} is unreadable: {e})")
            continue
        if not cases:
            missing.append(f"{label} (its {path} holds no test case)")
            continue
        for case in cases:
            name = f"{label} {case.get('classname', '')}.{case.get('name', '')}"
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
                failed_names.append(name)
            elif case.find("skipped") is not None or case.get("result") == "skipped":
                skipped += 1
                skipped_names.append(name)
            else:
                passed += 1
    for name in skipped_names:
        print(f"skipped: {name}")
    for name in failed_names:
        print(f"failed: {name}")
    for label in missing:
        print(f"no result: {label}")
    failed += len(missing)
    print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")


if __name__ == "__main__":
    main(sys.argv[1:])
