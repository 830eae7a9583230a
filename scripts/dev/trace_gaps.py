#!/usr/bin/env python3
"""Where a cold run waits: the GPU's idle gaps in a `vaecodec bench --warmup 0 --trace` Chrome trace.

A fresh process pays first calls (cuDNN plans, kernel modules loaded on their first launch, the allocator
mapping memory) that leave the GPU idle while the host works. Prints the GPU's busy time against the span,
the largest idle gaps with the kernel that ended each (its operator and input shapes), the gaps summed by that
kernel's operator, and the host operators that took longest. Usage:
    trace_gaps.py TRACE.json [--top N]
"""
import collections

import trace_events


def main():
    top, ops, cpu_ops, kernels = trace_events.from_command_line(top=25)
    if not kernels:
        print("no GPU activity in the trace")
        return

    def label(kernel):
        op = ops.get(kernel["args"].get("External id"))
        if op is None:
            return kernel["name"][:70]
        return op["name"] + " " + trace_events.shapes(op)

    start = kernels[0]["ts"]
    span = max(k["ts"] + k["dur"] for k in kernels) - start
    busy = sum(k["dur"] for k in kernels)
    print(f"GPU busy {busy / 1e3:.1f} ms of a {span / 1e3:.1f} ms span ({len(kernels)} kernels); "
          f"idle {(span - busy) / 1e3:.1f} ms")
    gaps = []
    end = kernels[0]["ts"] + kernels[0]["dur"]
    for k in kernels[1:]:
        if k["ts"] > end:
            gaps.append((k["ts"] - end, k["ts"] - start, k))
        end = max(end, k["ts"] + k["dur"])
    print(f"\nlargest idle gaps (ms, at ms since the first kernel, the kernel that ended the gap)")
    for gap, at, k in sorted(gaps, key=lambda g: -g[0])[: top]:
        print(f"{gap / 1e3:9.2f} {at / 1e3:9.1f}  {label(k)[:90]}  [{k['name'][:60]}]")
    by_op = collections.defaultdict(lambda: [0.0, 0])
    for gap, _, k in gaps:
        if gap < 50:  # launch-to-launch spacing, not a first call
            continue
        key = label(k).split(" ")[0] if k["args"].get("External id") in ops else k["name"][:60]
        by_op[key][0] += gap
        by_op[key][1] += 1
    print("\nidle gaps over 50 us, summed by what ended them (ms, gaps)")
    for key, (us, n) in sorted(by_op.items(), key=lambda kv: -kv[1][0])[: top]:
        print(f"{us / 1e3:9.2f} {n:6d}  {key}")
    print("\nlongest host operators (ms)")
    for e in sorted(cpu_ops, key=lambda e: -e.get("dur", 0))[: top]:
        print(f"{e.get('dur', 0) / 1e3:9.2f}  {e['name']} {trace_events.shapes(e)}")


if __name__ == "__main__":
    main()
