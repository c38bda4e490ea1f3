#!/usr/bin/python3
"""Runs the examples of README.md and docs/ as a reader would, and checks what they print.

  tests/readme/run_readme_examples.py        (from the repository root; CI runs it)

A ```sh block right after a `<!-- readme-test -->` line is run. The marked
blocks of README.md run first, then those of each file of DOCS, in that
order (the order of the README's map of docs/), each file's in its own
order, all in one bash session, so a variable or a file one block makes is
there for the next, as for a reader following along (a block may rely on
an earlier block of its own file or of a file before it). Every docs/*.md
must be in DOCS: one that is not is reported as a failed case, so no
doc's examples go unrun. In a block, a line starting with `$ ` is a command (continued by lines ending in
`\\`), and the lines up to the next command are what it prints: each must
match a line of its output, in order (`...` stands for anything, and the
example may leave lines out). A command ends with status 0, or the N of a
trailing `# exits N`. `./bazelw run //pkg:name --` runs the binary Bazel
built (bazel-bin/pkg/name: no Bazel inside the session), and /tmp/ is a
scratch folder of this run, in commands and output alike. Ends with
"N passed, N failed", a case per command, each named with its file.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

MARK = "<!-- readme-test -->"

# After README.md, in this order: the order of the README's map.
DOCS = [
    "docs/serving.md",
    "docs/batch-jobs.md",
    "docs/speculative-decoding.md",
    "docs/clusters.md",
    "docs/checkpoints-and-formats.md",
    "docs/structured-output.md",
    "docs/performance.md",
    "docs/gpu.md",
    "docs/architecture.md",
    "docs/tools.md",
    "docs/differences-from-reference.md",
    "docs/ci.md",
]


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


def example_files():
    """README.md, then the docs in DOCS' order; and the docs/*.md missing from DOCS."""
    present = sorted("docs/" + name for name in os.listdir("docs") if name.endswith(".md")) \
        if os.path.isdir("docs") else []
    return ["README.md"] + [doc for doc in DOCS if os.path.exists(doc)], [doc for doc in present if doc not in DOCS]


def main():
    files, unlisted = example_files()
    blocks = []  # (file, block)
    for path in files:
        with open(path, encoding="utf-8") as f:
            blocks += [(path, block) for block in marked_blocks(f.read())]
    passed = failed = 0
    for path in unlisted:
        failed += 1
        print("readme: FAIL: %s is not in DOCS of tests/readme/run_readme_examples.py: its examples would not run"
              % path)
    targets = sorted({t for _, block in blocks for command, _ in block for t in targets_of(command)})
    build = subprocess.run(["./bazelw", "build"] + targets, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
    if build.returncode != 0:
        print("readme: building %s failed:\n%s" % (" ".join(targets), build.stderr[-3000:]))
        print("%d passed, %d failed" % (passed, failed + 1))
        return 1
    scratch = tempfile.mkdtemp(prefix="readme-")
    # HOME stays: Bazel keeps its output tree (bazel-bin) under it.
    shell = subprocess.Popen(["bash", "--norc", "--noprofile"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        for path, block in blocks:
            for command, expected in block:
                output, status = run_in(shell, rewrite(command, scratch))
                mismatch = matches([rewrite(line, scratch) for line in expected], output.split("\n"))
                want = expected_status(command)
                if status == want and mismatch is None:
                    passed += 1
                    print("readme: pass: %s: $ %s" % (path, command[:100]))
                    continue
                failed += 1
                why = ("exit %d, expected %d" % (status, want)) if status != want else ("no line like %r" % mismatch)
                print("readme: FAIL: %s: $ %s\n  %s; it printed:\n%s" % (path, command, why, indent(output)))
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
