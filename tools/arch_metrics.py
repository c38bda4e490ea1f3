#!/usr/bin/env python3
"""The architecture figures of issue #30, for a checkout: copied logic
(pairs of places that the `duplicates` tool reports, both inside function
bodies of non-test sources), functions over 80 lines and files over 500.

Function extents come from Universal Ctags (`ctags --fields=+ne`, Debian's
universal-ctags); `duplicates` is the development machines' repetition
finder. Tests, fuzz targets and fixtures are left out: they may repeat a
setup for readability.

  /usr/bin/python3 tools/arch_metrics.py [checkout]   # exits 1 if a limit is exceeded
"""
import json
import re
import shutil
import subprocess
import sys

MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 500
PAIR = re.compile(r"\s*D\d+\s+(\S+):(\d+)-(\d+)\s+~\s+(\S+):(\d+)-(\d+)")


def is_test(path):
    return (path.endswith("_test.cc") or path.startswith("tests/") or "fuzz" in path or "fixture" in path)


def run(args, cwd):
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=True).stdout


def main(repo):
    for tool in ("ctags", "duplicates"):
        if shutil.which(tool) is None:
            sys.exit(f"arch_metrics: `{tool}` is not on PATH (ctags: apt-get install universal-ctags)")
    sources = [f for f in run(["git", "ls-files", "*.cc", "*.h", "*.cu", "*.cuh"], repo).split() if not is_test(f)]
    functions = {}
    long_functions = []
    tags = run(["ctags", "--fields=+ne", "--kinds-c++=f", "--output-format=json", "--language-force=c++", "-f", "-"]
               + sources, repo)
    for line in tags.splitlines():
        tag = json.loads(line)
        if "end" not in tag:
            continue
        functions.setdefault(tag["path"], []).append((tag["line"], tag["end"]))
        length = tag["end"] - tag["line"] + 1
        if length > MAX_FUNCTION_LINES:
            long_functions.append((length, f'{tag["path"]}:{tag["line"]} {tag["name"]}'))
    long_files = []
    for path in sources:
        with open(f"{repo}/{path}", errors="replace") as f:
            lines = sum(1 for _ in f)
        if lines > MAX_FILE_LINES:
            long_files.append((lines, path))

    def in_function(path, first, last):
        return any(begin <= first and last <= end for begin, end in functions.get(path, []))

    report = run(["duplicates", "--most", "200", "--seconds", "120"], repo)
    copied = []
    for line in report.splitlines():
        m = PAIR.match(line)
        if not m:
            continue
        a, a1, a2, b, b1, b2 = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4), int(m.group(5)), int(m.group(6))
        if not (is_test(a) or is_test(b)) and in_function(a, a1, a2) and in_function(b, b1, b2):
            copied.append(line.strip())
    print(f"copied logic: {len(copied)} pair(s)")
    for pair in copied:
        print(f"  {pair}")
    print(f"functions over {MAX_FUNCTION_LINES} lines: {len(long_functions)}")
    for length, where in sorted(long_functions, reverse=True):
        print(f"  {length:4d} {where}")
    print(f"files over {MAX_FILE_LINES} lines: {len(long_files)}")
    for length, path in sorted(long_files, reverse=True):
        print(f"  {length:4d} {path}")
    return 1 if long_functions or long_files else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
