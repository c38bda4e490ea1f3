#!/usr/bin/python3
"""Runs the README's examples as a reader would, and checks what they print.

  tests/readme/run_readme_examples.py        (from the repository root; CI runs it)

A ```sh block right after a `<!-- readme-test -->` line is run; the marked
blocks run in README order in one bash session, so a variable or a file one
block makes is there for the next, as for a reader following along. In a
block, a line starting with `$ ` is a command (continued by lines ending in
`\\`), and the lines up to the next command are what it prints: each must
match a line of its output, in order (`...` stands for anything, and the
example may leave lines out). A command ends with status 0, or the N of a
trailing `# exits N`. `./bazelw run //pkg:name --` runs the binary Bazel
built (bazel-bin/pkg/name: no Bazel inside the session), and /tmp/ is a
scratch folder of this run, in commands and output alike. Ends with
"N passed, N failed", a case per command.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

MARK = "<!-- readme-test -->"


def marked_blocks(readme):
    """Each marked block as a list of (command, expected lines)."""
    lines = readme.split("\n")
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != MARK or i + 1 >= len(lines) or not lines[i + 1].startswith("```sh"):
            continue
        j = i + 2
        body = []
        while j < len(lines) and not lines[j].startswith("```"):
            body.append(lines[j])
            j += 1
        blocks.append(parse_block(body))
    return blocks


def parse_block(body):
    commands = []
    k = 0
    while k < len(body):
        line = body[k]
        if not line.startswith("$ "):
            if commands:
                commands[-1][1].append(line)
            k += 1
            continue
        command = line[2:]
        while command.endswith("\\") and k + 1 < len(body):
            k += 1
            command = command[:-1] + " " + body[k].strip()
        commands.append((command, []))
        k += 1
    return commands


def targets_of(command):
    return re.findall(r"\./bazelw run (//[\w/]+(?::[\w]+)?)", command)


def binary_of(target):
    package, _, name = target[2:].partition(":")
    return "bazel-bin/%s/%s" % (package, name or package.split("/")[-1])


def rewrite(command, scratch):
    command = re.sub(r"\./bazelw run (//[\w/]+(?::[\w]+)?) --", lambda m: binary_of(m.group(1)), command)
    return command.replace("/tmp/", scratch + "/")


def expected_status(command):
    match = re.search(r"#\s*exits (\d+)\s*$", command)
    return int(match.group(1)) if match else 0


def matches(expected, output_lines):
    """Each expected line matches an output line, in order."""
    at = 0
    for want in expected:
        if not want.strip():
            continue
        pattern = ".*".join(re.escape(part) for part in want.strip().split("..."))
        while at < len(output_lines) and not re.fullmatch(pattern, output_lines[at].strip()):
            at += 1
        if at == len(output_lines):
            return want
        at += 1
    return None


def main():
    with open("README.md", encoding="utf-8") as f:
        blocks = marked_blocks(f.read())
    targets = sorted({t for block in blocks for command, _ in block for t in targets_of(command)})
    build = subprocess.run(["./bazelw", "build"] + targets, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
    if build.returncode != 0:
        print("readme: building %s failed:\n%s" % (" ".join(targets), build.stderr[-3000:]))
        print("0 passed, 1 failed")
        return 1
    scratch = tempfile.mkdtemp(prefix="readme-")
    # HOME stays: Bazel keeps its output tree (bazel-bin) under it.
    shell = subprocess.Popen(["bash", "--norc", "--noprofile"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    passed = failed = 0
    try:
        for block in blocks:
            for command, expected in block:
                output, status = run_in(shell, rewrite(command, scratch))
                mismatch = matches([rewrite(line, scratch) for line in expected], output.split("\n"))
                want = expected_status(command)
                if status == want and mismatch is None:
                    passed += 1
                    print("readme: pass: $ %s" % command[:100])
                    continue
                failed += 1
                why = ("exit %d, expected %d" % (status, want)) if status != want else ("no line like %r" % mismatch)
                print("readme: FAIL: $ %s\n  %s; it printed:\n%s" % (command, why, indent(output)))
    finally:
        shell.stdin.close()
        shell.wait()
        shutil.rmtree(scratch, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


def run_in(shell, command):
    """Runs `command` in the session; its output and exit status."""
    end = "__readme_end__"
    shell.stdin.write("{ %s\n} < /dev/null\necho \"%s $?\"\n" % (command, end))
    shell.stdin.flush()
    output = []
    for line in shell.stdout:
        if line.startswith(end + " "):
            return "".join(output), int(line.split()[1])
        output.append(line)
    return "".join(output), -1


def indent(text):
    return "\n".join("    " + line for line in text.rstrip("\n").split("\n")[-20:])


if __name__ == "__main__":
    sys.exit(main())
