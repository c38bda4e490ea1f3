"""The versions of the Python libraries that make the test fixtures.

The fixture genrules (tests/fixtures) run Debian's /usr/bin/python3 with
PyTorch and SentencePiece; their outputs are cached (the disk cache
outlives checkouts) by the genrules' inputs alone. This repository writes
the installed versions into a file the genrules take as an input, so an
upgraded PyTorch or SentencePiece remakes the goldens instead of serving
stale ones. Re-evaluated whenever Bazel fetches (local = True): every new
output base, as CI's fresh clones have.
"""

def _python_versions_impl(ctx):
    script = "\n".join([
        "import importlib",
        "for name in ('torch', 'sentencepiece', 'numpy'):",
        "    try:",
        "        print(name, importlib.import_module(name).__version__)",
        "    except Exception as error:",
        "        print(name, 'missing:', type(error).__name__)",
    ])
    result = ctx.execute(["/usr/bin/python3", "-c", script], quiet = True)
    text = result.stdout if result.return_code == 0 else "python3 failed: %s\n" % result.stderr
    ctx.file("versions.txt", text)
    ctx.file("BUILD.bazel", 'exports_files(["versions.txt"])\n')
    ctx.file("WORKSPACE", "")

python_versions = repository_rule(
    implementation = _python_versions_impl,
    local = True,
)
