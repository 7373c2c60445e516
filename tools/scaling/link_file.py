"""The scaling model's link file (tools/scaling_model --fit's output): one
`key = value` a line, `#` comments. Shared by tools/scaling/scaling_validation's
checks."""


def read(path):
    """The file's values as strings, by key."""
    with open(path) as f:
        return dict(line.split(" = ", 1) for line in f.read().splitlines() if " = " in line)


def allreduce_s(link, ranks, nbytes):
    """A ring all-reduce of `nbytes` over `ranks` ranks on the fitted link,
    uncontended: 2(N-1) hops' latency, and each rank's 2(N-1)/N of the
    bytes at the bus bandwidth (comm/scaling_model.h)."""
    hops = 2 * (ranks - 1)
    return hops * float(link["latency_us"]) * 1e-6 + hops / ranks * nbytes / (float(link["bus_gbps"]) * 1e9)
