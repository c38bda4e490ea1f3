#!/usr/bin/python3
"""Counts test cases (not only Bazel targets) from the test XML files of a
`bazel test` run, so that skipped cases are visible: prints one line about
the skips and ends with "N passed, N failed" (cases).

usage: summarize_tests.py TESTLOGS_DIR BAZEL_OUTPUT_LOG
A target Bazel reports as failed (or failed to build, timed out) without a
failing case in its XML counts as one failed case.
"""
import collections
import os
import re
import sys
import xml.etree.ElementTree as ET

testlogs, bazel_log = sys.argv[1], sys.argv[2]
target_status = {}
for line in open(bazel_log, errors="replace"):
    m = re.match(r"^(//\S+)\s+(?:\(cached\) )?(PASSED|FAILED TO BUILD|FAILED|TIMEOUT|NO STATUS|INCOMPLETE|FLAKY)", line)
    if m:
        target_status[m.group(1)] = m.group(2)

passed = failed = skipped = 0
skip_reasons = collections.Counter()
for target, status in sorted(target_status.items()):
    package, name = target[2:].split(":")
    xml_path = os.path.join(testlogs, package, name, "test.xml")
    case_failed = 0
    if status != "FAILED TO BUILD" and os.path.exists(xml_path):
        try:
            root = ET.parse(xml_path).getroot()
        except ET.ParseError:
            root = None
        for case in root.iter("testcase") if root is not None else []:
            skip = case.find("skipped")
            if case.get("result") == "skipped" or skip is not None:
                skipped += 1
                reason = (skip.get("message", "") if skip is not None else "").splitlines()
                skip_reasons[reason[-1] if reason else "no reason given"] += 1
            elif case.find("failure") is not None or case.find("error") is not None:
                case_failed += 1
            else:
                passed += 1
    if status != "PASSED" and case_failed == 0:
        case_failed = 1  # Failed to build, timed out, or crashed outside any case.
    failed += case_failed

print(f"ci: {len(target_status)} test targets; {passed + failed + skipped} cases: "
      f"{passed} passed, {failed} failed, {skipped} skipped")
for reason, count in skip_reasons.most_common():
    print(f"ci: {count} cases skipped: {reason}")
if not skipped:
    print("ci: no case skipped")
print(f"{passed} passed, {failed} failed")
