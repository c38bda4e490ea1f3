"""Project-wide C++ rules: one place for copts, warnings and test wiring.

Every BUILD file in the project uses these macros instead of the native
rules, so that a flag change (warnings, sanitizers, standards) is made once.
"""

# Warnings are errors in our own code only; system headers are included as
# -isystem by the toolchain and stay out of it.
LLAMA_COPTS = [
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wno-sign-compare",
    "-Wno-unused-parameter",
]

def llama_cc_library(name, copts = [], **kwargs):
    native.cc_library(name = name, copts = LLAMA_COPTS + copts, **kwargs)

def llama_cc_binary(name, copts = [], **kwargs):
    native.cc_binary(name = name, copts = LLAMA_COPTS + copts, **kwargs)

def llama_cc_test(name, copts = [], deps = [], **kwargs):
    """A GoogleTest binary with our main (glog and gflags initialised).

    Linked statically like the binaries (Bazel links tests against per-library
    .so files by default), which the protobuf binding needs: see
    system_libs.bzl.
    """
    native.cc_test(
        name = name,
        linkstatic = True,
        copts = LLAMA_COPTS + copts,
        deps = deps + ["//third_party:gtest_main"],
        **kwargs
    )

def proto_cc_library(name, srcs, deps = [], visibility = None):
    """Compiles `srcs` (.proto) with Debian's protoc into a cc_library.

    `deps` are other proto_cc_library targets whose .proto files `srcs`
    import. Imports are written relative to the workspace root
    (import "checkpoint/shard.proto";).
    """
    outs = []
    for src in srcs:
        if not src.endswith(".proto"):
            fail("proto_cc_library %s: %s is not a .proto file" % (name, src))
        base = src[:-len(".proto")]
        outs += [base + ".pb.h", base + ".pb.cc"]
    native.filegroup(name = name + "_protos", srcs = srcs + [d + "_protos" for d in deps], visibility = visibility)
    native.genrule(
        name = name + "_protoc",
        srcs = srcs + [d + "_protos" for d in deps],
        outs = outs,
        tools = ["@system_libs//:protoc"],
        cmd = "$(location @system_libs//:protoc) --proto_path=. --cpp_out=$(GENDIR) " +
              " ".join(["$(location %s)" % s for s in srcs]),
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + ["@system_libs//:protobuf"],
        visibility = visibility,
    )

def llama_fuzz_test(name, srcs, deps = [], seeds = [], seconds = 5, **kwargs):
    """A fuzz target (LLVMFuzzerTestOneInput in `srcs`) run as a bounded test.

    By default it links //third_party:fuzz_driver, which replays `seeds` and
    random mutations of them for `seconds`. With --config=libfuzzer (clang)
    it links libFuzzer instead, for open-ended coverage-guided runs:
      bazel run --config=libfuzzer //checkpoint:zip_reader_fuzz_test -- -max_total_time=600
    """
    native.cc_test(
        name = name,
        linkstatic = True,
        srcs = srcs,
        copts = LLAMA_COPTS,
        deps = deps + ["//third_party:fuzz_check"] + select({
            "//third_party:libfuzzer": [],
            "//conditions:default": ["//third_party:fuzz_driver"],
        }),
        linkopts = select({
            "//third_party:libfuzzer": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        data = seeds,
        # libFuzzer takes a corpus folder instead (it would run seed files once and stop).
        args = select({
            "//third_party:libfuzzer": [],
            "//conditions:default": ["--fuzz_seconds=%d" % seconds] + ["$(location %s)" % s for s in seeds],
        }),
        **kwargs
    )
