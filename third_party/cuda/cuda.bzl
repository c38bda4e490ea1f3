"""nvcc compilation for Bazel 4 without rules_cuda (not available offline).

`cuda_library` compiles each .cu file with the toolkit's nvcc into a
position-independent object (fatbin for sm_80 and sm_90, plus compute_90
PTX so newer GPUs can JIT it) and wraps the objects in a cc_library that
any C++ target can depend on. Header search paths and defines come from
the CcInfo of `deps`, exactly as a cc_library would see them.

When @local_cuda found no toolkit, both macros define nothing; callers guard
CUDA-only dependencies with `if_cuda`.
"""

load("@local_cuda//:defs.bzl", "CUDA_AVAILABLE", "NVCC")
load("//third_party:build_defs.bzl", "LLAMA_COPTS", "llama_cc_library", "llama_cc_test")

CUDA_ARCHS = ["80", "90"]

_NVCC_FLAGS = [
    "-std=c++17",
    "-O2",
    "-Xcompiler=-fPIC",
    "--expt-relaxed-constexpr",
] + ["-gencode=arch=compute_%s,code=sm_%s" % (a, a) for a in CUDA_ARCHS] + [
    "-gencode=arch=compute_%s,code=compute_%s" % (CUDA_ARCHS[-1], CUDA_ARCHS[-1]),
]

def if_cuda(if_true, if_false = []):
    """Selects `if_true` when the workspace was configured with a CUDA toolkit."""
    return if_true if CUDA_AVAILABLE else if_false

def _cuda_objects_impl(ctx):
    cc_infos = [d[CcInfo] for d in ctx.attr.deps if CcInfo in d]
    contexts = [c.compilation_context for c in cc_infos]
    headers = depset(ctx.files.hdrs, transitive = [c.headers for c in contexts])
    args_common = list(_NVCC_FLAGS)
    args_common += ["-Xcompiler=" + f for f in LLAMA_COPTS if f != "-Wextra"]
    args_common += ["-I.", "-I" + ctx.bin_dir.path, "-I" + ctx.genfiles_dir.path]
    for c in contexts:
        args_common += ["-I" + p for p in c.includes.to_list() + c.quote_includes.to_list()]
        for p in c.system_includes.to_list():
            args_common += ["-isystem", p]
        args_common += ["-D" + d for d in c.defines.to_list()]
    outs = []
    for src in ctx.files.srcs:
        out = ctx.actions.declare_file("_cuda_objs/%s/%s.pic.o" % (ctx.label.name, src.basename[:-len(".cu")]))
        ctx.actions.run(
            executable = ctx.attr.nvcc,
            arguments = args_common + ctx.attr.copts + ["-c", src.path, "-o", out.path],
            inputs = depset([src], transitive = [headers]),
            outputs = [out],
            mnemonic = "Nvcc",
            progress_message = "nvcc %s" % src.short_path,
            use_default_shell_env = True,
        )
        outs.append(out)
    return [DefaultInfo(files = depset(outs))]

_cuda_objects = rule(
    implementation = _cuda_objects_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = True),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(),
        "nvcc": attr.string(mandatory = True),
    },
)

def cuda_library(name, srcs, hdrs = [], deps = [], copts = [], **kwargs):
    """A cc_library that needs the toolkit. Nothing without CUDA.

    `.cu` sources are compiled by nvcc (with `copts` passed to nvcc); the
    other sources (host C++ that calls the CUDA runtime, cuBLAS or NCCL) by
    the C++ toolchain as in any cc_library.
    """
    if not CUDA_AVAILABLE:
        return
    cu_srcs = [s for s in srcs if s.endswith(".cu")]
    cc_srcs = [s for s in srcs if not s.endswith(".cu")]
    if cu_srcs:
        _cuda_objects(
            name = name + "_cuda_objs",
            srcs = cu_srcs,
            hdrs = hdrs,
            deps = deps + ["@local_cuda//:cuda_headers"],
            copts = copts,
            nvcc = NVCC,
        )
        cc_srcs = cc_srcs + [":" + name + "_cuda_objs"]
    llama_cc_library(
        name = name,
        srcs = cc_srcs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cudart"],
        **kwargs
    )

def cuda_test(name, **kwargs):
    """A llama_cc_test that needs the CUDA toolkit to build. Nothing without it."""
    if not CUDA_AVAILABLE:
        return
    llama_cc_test(name = name, **kwargs)
