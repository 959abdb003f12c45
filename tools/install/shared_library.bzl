"""whole_shared_library: links cc_library deps, every object of them, into one .so.

A cc_binary(linkshared = 1) links its deps' archives the ordinary way, so objects that no
other object references (gradcheck, custom functions, anything only users call) are
dropped and the .so has undefined symbols. This rule relinks the same archives with
alwayslink (--whole-archive), so every object of the closure is in the library. The
archives are the ones the cc_library targets already build (the .pic.o of a fastbuild
`bazel test` are reused: only the link is new).

Outputs lib<name>.so (SONAME lib<name>.so) and <name>.linkopts: the deps' link flags
(system libraries), one per line, for the CMake and pkg-config files tools/install.sh
writes.
"""

load("//:build_defs.bzl", "cc_toolchain_setup")

def _whole_shared_library_impl(ctx):
    cc_toolchain, feature_configuration, merged = cc_toolchain_setup(ctx)
    libraries = []
    flags = []
    for linker_input in merged.linking_context.linker_inputs.to_list():
        for flag in linker_input.user_link_flags:
            if flag not in flags:
                flags.append(flag)
        for lib in linker_input.libraries:
            archive = lib.pic_static_library or lib.static_library
            if archive == None:
                fail("%s: %s has no static archive to link whole" % (ctx.label, linker_input.owner))
            libraries.append(cc_common.create_library_to_link(
                actions = ctx.actions,
                feature_configuration = feature_configuration,
                cc_toolchain = cc_toolchain,
                static_library = archive,
                pic_static_library = archive,
                alwayslink = True,
            ))
    soname = "lib%s.so" % ctx.label.name
    linking_context = cc_common.create_linking_context(linker_inputs = depset([
        cc_common.create_linker_input(
            owner = ctx.label,
            libraries = depset(libraries),
            user_link_flags = depset(flags + ["-Wl,-soname," + soname, "-Wl,--no-undefined"]),
        ),
    ]))
    linking_outputs = cc_common.link(
        actions = ctx.actions,
        name = ctx.label.name,
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        linking_contexts = [linking_context],
        output_type = "dynamic_library",
        link_deps_statically = True,
    )
    # dynamic_library is a symlink under _solib_<cpu>; the install wants the file itself.
    library = linking_outputs.library_to_link
    so = library.resolved_symlink_dynamic_library or library.dynamic_library
    linkopts = ctx.actions.declare_file(ctx.label.name + ".linkopts")
    ctx.actions.write(linkopts, "".join([f + "\n" for f in flags]))
    return [DefaultInfo(files = depset([so, linkopts]))]

whole_shared_library = rule(
    implementation = _whole_shared_library_impl,
    attrs = {
        "deps": attr.label_list(providers = [CcInfo]),
        "_cc_toolchain": attr.label(default = "@bazel_tools//tools/cpp:current_cc_toolchain"),
    },
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
    fragments = ["cpp"],
)
