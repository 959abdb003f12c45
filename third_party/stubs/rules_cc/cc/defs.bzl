# Offline stand-in for rules_cc: forwards to Bazel's native rules (ARCHITECTURE.md §10).
def cc_binary(**kw):
    native.cc_binary(**kw)

def cc_library(**kw):
    native.cc_library(**kw)

def cc_test(**kw):
    native.cc_test(**kw)

def cc_toolchain(**kw):
    native.cc_toolchain(**kw)

def cc_toolchain_suite(**kw):
    native.cc_toolchain_suite(**kw)

def cc_proto_library(**kw):
    native.cc_proto_library(**kw)

def objc_library(**kw):
    native.objc_library(**kw)

def cc_import(**kw):
    native.cc_import(**kw)

