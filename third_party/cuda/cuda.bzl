"""`cuda_library`: compiles .cu files with nvcc and links them like a cc_library.

Whole-program compilation (no -rdc), so no device-link step is needed. Objects are built
with -fPIC because Bazel links test dependencies as shared objects. The rule is
incompatible where @local_cuda has no toolkit, which propagates to dependents.

In the interpreted configuration (@local_cuda's CUDA_EMULATED, `--config=cudaemu`) the
same sources are compiled as host C++ by the C++ toolchain's compiler, against the
stand-in headers that @local_cuda then points at (runtime/cudaemu), with
STREAMGRAD_CUDA_EMULATED defined and the build's --copt flags (so a sanitizer config
instruments them too). `copts` are nvcc's and are not passed there; `emulated_copts` are.
No contraction into FMAs either way: nvcc's -fmad=false, and -ffp-contract=off here.
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")
load("@local_cuda//:defs.bzl", "CUDA_COMPATIBLE", "CUDA_EMULATED", "NVCC")

_GENCODE = [
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
]

# g++ warns where nvcc's device compiler does not: `#pragma unroll`, and `threadIdx.x < n`
# with an int n.
_EMULATED_WARNINGS = ["-Wno-unknown-pragmas", "-Wno-sign-compare"]

def _compile_emulated(ctx, cc_toolchain, comp, headers, src, obj):
    args = ctx.actions.args()
    args.add_all(["-x", "c++", "-c", "-std=c++17", "-O1", "-fPIC", "-ffp-contract=off", "-I."])
    args.add("-DSTREAMGRAD_CUDA_EMULATED")
    if ctx.var.get("COMPILATION_MODE") == "opt":
        args.add("-O2")
    args.add_all(ctx.fragments.cpp.copts)
    args.add_all(ctx.fragments.cpp.cxxopts)
    args.add_all(_EMULATED_WARNINGS)
    args.add_all(ctx.attr.emulated_copts)
    for inc in comp.includes.to_list() + comp.system_includes.to_list():
        args.add("-I" + inc)
    for inc in comp.quote_includes.to_list():
        args.add("-iquote" + inc)
    for d in comp.defines.to_list():
        args.add("-D" + d)
    args.add_all(["-o", obj, src])
    ctx.actions.run(
        executable = cc_toolchain.compiler_executable,
        arguments = [args],
        inputs = depset([src], transitive = [headers, cc_toolchain.all_files]),
        outputs = [obj],
        mnemonic = "CudaEmuCompile",
        progress_message = "Compiling %s as host C++ (interpreted CUDA)" % src.short_path,
        use_default_shell_env = True,
    )
    return obj

def _cuda_library_impl(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    dep_infos = [d[CcInfo] for d in ctx.attr.deps]
    merged = cc_common.merge_cc_infos(cc_infos = dep_infos)
    comp = merged.compilation_context
    headers = depset(ctx.files.hdrs, transitive = [comp.headers])
    objects = []
    for src in ctx.files.srcs:
        obj = ctx.actions.declare_file("_objs/%s/%s.o" % (ctx.label.name, src.basename))
        if CUDA_EMULATED:
            objects.append(_compile_emulated(ctx, cc_toolchain, comp, headers, src, obj))
            continue
        args = ctx.actions.args()
        # -objtemp: intermediate files beside the object. In /tmp they are named after the
        # process id, which is the same in every sandbox (a PID namespace each), so two
        # nvcc actions running at once overwrote each other's files (nvcc exit 255).
        args.add_all(["-c", "-std=c++17", "-O2", "-Xcompiler", "-fPIC", "-I.", "-objtemp"])
        args.add_all(["-ccbin", cc_toolchain.compiler_executable])
        args.add_all(_GENCODE)
        args.add_all(ctx.attr.copts)
        for inc in comp.includes.to_list() + comp.system_includes.to_list() + comp.quote_includes.to_list():
            args.add("-I" + inc)
        for d in comp.defines.to_list():
            args.add("-D" + d)
        args.add_all(["-o", obj, src])
        ctx.actions.run(
            executable = NVCC,
            arguments = [args],
            inputs = depset([src], transitive = [headers]),
            outputs = [obj],
            mnemonic = "NvccCompile",
            progress_message = "nvcc %s" % src.short_path,
            use_default_shell_env = True,
        )
        objects.append(obj)
    archive = ctx.actions.declare_file("lib%s.a" % ctx.label.name)
    ctx.actions.run(
        executable = cc_toolchain.ar_executable,
        arguments = ["rcs", archive.path] + [o.path for o in objects],
        inputs = objects,
        outputs = [archive],
        mnemonic = "NvccArchive",
    )
    feature_configuration = cc_common.configure_features(ctx = ctx, cc_toolchain = cc_toolchain)
    library = cc_common.create_library_to_link(
        actions = ctx.actions,
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        static_library = archive,
        pic_static_library = archive,
        alwayslink = ctx.attr.alwayslink,
    )
    linker_input = cc_common.create_linker_input(
        owner = ctx.label,
        libraries = depset([library]),
    )
    own = CcInfo(
        compilation_context = cc_common.create_compilation_context(
            headers = depset(ctx.files.hdrs),
        ),
        linking_context = cc_common.create_linking_context(linker_inputs = depset([linker_input])),
    )
    return [
        DefaultInfo(files = depset([archive])),
        cc_common.merge_cc_infos(direct_cc_infos = [own], cc_infos = dep_infos),
    ]

_cuda_library = rule(
    implementation = _cuda_library_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = [".h", ".cuh"]),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(),
        "emulated_copts": attr.string_list(),
        "alwayslink": attr.bool(default = False),
        "_cc_toolchain": attr.label(default = "@bazel_tools//tools/cpp:current_cc_toolchain"),
    },
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
    fragments = ["cpp"],
)

def cuda_library(name, deps = [], **kwargs):
    _cuda_library(
        name = name,
        deps = deps + ["@local_cuda//:cuda_headers"],
        target_compatible_with = CUDA_COMPATIBLE,
        **kwargs
    )
