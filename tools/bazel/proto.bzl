"""proto_cc_library: compiles .proto files with the system protoc."""

def proto_cc_library(name, srcs, deps = [], **kwargs):
    hdrs = [s.replace(".proto", ".pb.h") for s in srcs]
    ccs = [s.replace(".proto", ".pb.cc") for s in srcs]
    native.genrule(
        name = name + "_protoc",
        srcs = srcs,
        outs = hdrs + ccs,
        cmd = "/usr/bin/protoc --proto_path=. --cpp_out=$(GENDIR) " +
              " ".join(["$(location %s)" % s for s in srcs]),
        message = "protoc " + " ".join(srcs),
    )
    native.cc_library(
        name = name,
        srcs = ccs,
        hdrs = hdrs,
        deps = deps + ["@system//:protobuf"],
        **kwargs
    )
