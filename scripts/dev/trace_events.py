"""What trace_summary.py and trace_gaps.py read of a `vaecodec bench --trace` Chrome trace (Kineto)."""
import argparse
import json

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def load(path):
    """The trace's host operators by their external id, all host operators, and the GPU's work in time order."""
    events = json.load(open(path))["traceEvents"]
    cpu_ops = [e for e in events if e.get("cat") == "cpu_op"]
    ops = {e["args"].get("External id"): e for e in cpu_ops}
    kernels = sorted((e for e in events if e.get("cat") in GPU_CATEGORIES), key=lambda e: e["ts"])
    return ops, cpu_ops, kernels


def shapes(op, count=2):
    """The first `count` input shapes of a host operator, as "1x96x4x720x1280 96x96x3x3x3"."""
    dims = [d for d in op["args"].get("Input Dims", []) if d]
    return " ".join("x".join(map(str, d)) for d in dims[:count])


def from_command_line(top):
    """The trace named on the command line, loaded (see load), and --top N (default `top`)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("trace")
    parser.add_argument("--top", type=int, default=top)
    args = parser.parse_args()
    return (args.top,) + load(args.trace)
