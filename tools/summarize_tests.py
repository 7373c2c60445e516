#!/usr/bin/env python3
"""Counts test cases in the JUnit XML that `bazel test` left for each target.

usage: summarize_tests.py //pkg:target ...

Prints the skipped cases (CUDA tests on a machine without a GPU) and a closing
line "tests: N passed, N failed, N skipped" over every gtest case (a shell
test counts as one case).
"""
import os
import sys
import xml.etree.ElementTree as ET


def xml_path(label):
    package, _, name = label.lstrip("/").partition(":")
    return os.path.join("bazel-testlogs", package, name, "test.xml")


def main(labels):
    passed = failed = skipped = 0
    skipped_names, missing = [], []
    for label in labels:
        path = xml_path(label)
        if not os.path.exists(path):
            missing.append(f"{label} (did not build or run)")
            continue
        try:
            cases = ET.parse(path).getroot().iter("testcase")
        except ET.ParseError as e:
            missing.append(f"{label} (its {path} is unreadable: {e})")
            continue
        for case in cases:
            name = f"{label} {case.get('classname', '')}.{case.get('name', '')}"
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
            elif case.find("skipped") is not None or case.get("result") == "skipped":
                skipped += 1
                skipped_names.append(name)
            else:
                passed += 1
    for name in skipped_names:
        print(f"skipped: {name}")
    for label in missing:
        print(f"no result: {label}")
    failed += len(missing)
    print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")


if __name__ == "__main__":
    main(sys.argv[1:])
