"""Publishes Debian's libabsl-dev under abseil's upstream Bazel labels.

Each target carries only link flags: the headers live in /usr/include, which the toolchain
already searches. The flag sets are the minimal ones found by trial (ARCHITECTURE.md §10).
"""

_TARGETS = {
    "absl/status": {
        "status": ["-labsl_status"],
        "statusor": ["-labsl_statusor", "-labsl_status"],
    },
    "absl/strings": {
        "strings": ["-labsl_strings", "-labsl_throw_delegate"],
        "str_format": ["-labsl_str_format_internal", "-labsl_strings", "-labsl_throw_delegate"],
    },
    "absl/container": {
        "flat_hash_map": ["-labsl_raw_hash_set", "-labsl_hash"],
        "flat_hash_set": ["-labsl_raw_hash_set", "-labsl_hash"],
        "inlined_vector": ["-labsl_throw_delegate"],
    },
    "absl/types": {
        "span": [],
        "optional": [],
    },
    "absl/base": {
        "core_headers": [],
    },
    "absl/functional": {
        "function_ref": [],
    },
    "absl/flags": {
        "flag": ["-labsl_flags_internal", "-labsl_flags_marshalling",
                 "-labsl_flags_reflection", "-labsl_flags_config", "-labsl_flags_private_handle_accessor",
                 "-labsl_flags_commandlineflag", "-labsl_flags_commandlineflag_internal",
                 "-labsl_flags_program_name", "-labsl_str_format_internal", "-labsl_strings",
                 "-labsl_throw_delegate"],
        "parse": ["-labsl_flags_parse", "-labsl_flags_usage", "-labsl_flags_usage_internal",
                  "-labsl_flags_internal", "-labsl_flags_marshalling", "-labsl_flags_reflection",
                  "-labsl_flags_config", "-labsl_flags_private_handle_accessor",
                  "-labsl_flags_commandlineflag", "-labsl_flags_commandlineflag_internal",
                  "-labsl_flags_program_name", "-labsl_str_format_internal", "-labsl_strings",
                  "-labsl_throw_delegate"],
    },
}

def _system_absl_impl(rctx):
    if not rctx.path("/usr/include/absl/base/config.h").exists:
        fail("libabsl-dev is not installed: run tools/bootstrap.sh (apt-get install libabsl-dev)")
    rctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % rctx.name)
    rctx.file("BUILD", "")
    for pkg, targets in _TARGETS.items():
        lines = ["package(default_visibility = [\"//visibility:public\"])", ""]
        for name, flags in targets.items():
            lines.append("cc_library(name = %r, linkopts = %r)" % (name, flags))
        rctx.file(pkg + "/BUILD", "\n".join(lines) + "\n")

system_absl = repository_rule(
    implementation = _system_absl_impl,
    local = True,
)
