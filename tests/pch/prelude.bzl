"""cc_prelude: a header precompiled once per configuration for the test sources that use it.

Every test source parses the same heavy headers (Catch2, the tensor API, the operators):
about a second of each test file's compile, paid again in each of CI's three
configurations. cc_prelude compiles one header with the exact command line the C++ rules
give a test source in the current configuration, so GCC accepts the result (`<name>.h.gch`
beside a generated `<name>.h`); a test compiled with `-include tests/pch/<name>.h` (the
catch_test macro adds it) then loads it instead of parsing those headers, and includes
`<name>_stamp.h` after it, so that a change to the prelude rebuilds the test (see below).

GCC uses a precompiled header only when the options that shape it (optimisation level,
sanitizers, -fPIC, macros) match the source's; the test sources add -Winvalid-pch, so a
mismatch is a warning (an error in the default build, which has -Werror), never a silent
slowdown. Sources compiled with other options (per_file_copt) simply parse the header.
"""

load("//:build_defs.bzl", "cc_toolchain_setup")

def _cc_prelude_impl(ctx):
    cc_toolchain, features, deps = cc_toolchain_setup(ctx)
    context = deps.compilation_context

    # The generated header only includes the real one: the -include search finds it in the
    # output tree, next to its .gch, and never a source file of the same name.
    header = ctx.actions.declare_file(ctx.label.name + ".h")
    ctx.actions.write(header, "#include \"%s\"\n" % ctx.file.hdr.short_path)
    gch = ctx.actions.declare_file(ctx.label.name + ".h.gch")
    # GCC's list of the headers the prelude actually includes: the stamp hashes these.
    included = ctx.actions.declare_file(ctx.label.name + ".h.d")

    action = "c++-compile"
    variables = cc_common.create_compile_variables(
        cc_toolchain = cc_toolchain,
        feature_configuration = features,
        source_file = header.path,
        output_file = gch.path,
        user_compile_flags = ctx.fragments.cpp.copts + ctx.fragments.cpp.cxxopts +
                             ctx.attr.copts + ["-x", "c++-header", "-MD", "-MF", included.path],
        include_directories = context.includes,
        quote_include_directories = depset(
            [".", ctx.genfiles_dir.path, ctx.bin_dir.path],
            transitive = [context.quote_includes],
        ),
        system_include_directories = context.system_includes,
        preprocessor_defines = context.defines,
        use_pic = True,
        add_legacy_cxx_options = True,
    )
    ctx.actions.run(
        executable = cc_common.get_tool_for_action(
            feature_configuration = features,
            action_name = action,
        ),
        arguments = cc_common.get_memory_inefficient_command_line(
            feature_configuration = features,
            action_name = action,
            variables = variables,
        ),
        env = cc_common.get_environment_variables(
            feature_configuration = features,
            action_name = action,
            variables = variables,
        ),
        inputs = depset(
            [header, ctx.file.hdr],
            transitive = [context.headers, cc_toolchain.all_files],
        ),
        outputs = [gch, included],
        mnemonic = "CppPrecompileHeader",
        progress_message = "Precompiling %s" % ctx.file.hdr.short_path,
        # 100-200 MB per configuration, rebuilt whenever a header it holds changes: not
        # worth a place in the disk cache.
        execution_requirements = {"no-cache": "1"},
    )
    # Two things keep a test object right and cacheable.
    # 1. GCC's dependency file never names a precompiled header, nor the headers inside
    #    it, and Bazel keeps as inputs of a compile only what that file names: without
    #    more, a test object would outlive a change to any header of the prelude (stale
    #    vtables, crashes). The stamp is a header that names a digest of the prelude's
    #    headers; the tests include it after the prelude, so their dependency files name
    #    it, and it changes whenever one of those headers does.
    # 2. GCC's precompiled header is not reproducible (it is a memory image: addresses
    #    and a per-process random value differ from run to run), so as a declared input it
    #    would give every test compile a new cache key in every output base, and CI would
    #    recompile every test object in every configuration. It is therefore not an input
    #    of the test compiles: the stamp's action needs it, so it exists in the execution
    #    root before any test compiles, and test compiles run outside the sandbox
    #    (.bazelrc), where GCC finds it beside the generated header. A compile that does
    #    not see it (a sandboxed one) parses the headers instead: slower, same object.
    #    The digest covers what the object depends on (the headers), not the .gch.
    # 3. The digest covers the headers the prelude includes (GCC's dependency file of the
    #    precompile, system headers too), not every header of its dependencies: a change
    #    to a header no prelude includes (a kernel's, a private one) recompiles only the
    #    tests that include it themselves. With the whole closure hashed, any such change
    #    recompiled every test object in all three of CI's configurations (~170 files,
    #    ~10 minutes of CI per configuration).
    stamp = ctx.actions.declare_file(ctx.label.name + "_stamp.h")
    ctx.actions.run_shell(
        inputs = depset([gch, included, header, ctx.file.hdr], transitive = [context.headers]),
        outputs = [stamp],
        arguments = [included.path, stamp.path],
        command = r"""sed -e '1s/^[^:]*://' "$1" | tr -d '\\' | tr ' ' '\n' | grep -v '^$' |
            LC_ALL=C sort -u | tr '\n' '\0' | xargs -0 sha1sum | sha1sum | cut -d' ' -f1 |
            sed 's|^|// |' > "$2" """,
        mnemonic = "CppPrecompileStamp",
        progress_message = "Stamping %s" % ctx.file.hdr.short_path,
    )
    mine = CcInfo(compilation_context = cc_common.create_compilation_context(
        headers = depset([header, stamp, ctx.file.hdr]),
    ))
    return [
        DefaultInfo(files = depset([gch])),
        cc_common.merge_cc_infos(cc_infos = [mine, deps]),
    ]

cc_prelude = rule(
    implementation = _cc_prelude_impl,
    attrs = {
        "hdr": attr.label(allow_single_file = [".h"], mandatory = True),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(),
        "_cc_toolchain": attr.label(default = "@bazel_tools//tools/cpp:current_cc_toolchain"),
    },
    fragments = ["cpp"],
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
    incompatible_use_toolchain_transition = True,
)
