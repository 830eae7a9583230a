#!/usr/bin/env python3
"""Sums the GPU time of a `vaecodec bench --trace` Chrome trace.

Prints the GPU kernels' total time grouped by the operator that launched them and its input shapes (the
convolutions by shape, the norms, the copies), then by kernel name. Usage:
    trace_summary.py TRACE.json [--top N]
"""
import collections

import trace_events


def main():
    top, ops, _, kernels = trace_events.from_command_line(top=30)
    total_us = sum(k["dur"] for k in kernels)
    if kernels:
        span_us = max(k["ts"] + k["dur"] for k in kernels) - min(k["ts"] for k in kernels)
    else:
        span_us = 0.0
    print(f"GPU busy {total_us / 1e3:.1f} ms of a {span_us / 1e3:.1f} ms span, {len(kernels)} kernels")

    by_op = collections.defaultdict(lambda: [0.0, 0])
    by_kernel = collections.defaultdict(lambda: [0.0, 0])
    for k in kernels:
        op = ops.get(k["args"].get("External id"))
        if op is None:
            key = ("(no operator)", "")
        else:
            key = (op["name"], trace_events.shapes(op))
        by_op[key][0] += k["dur"]
        by_op[key][1] += 1
        by_kernel[k["name"][:110]][0] += k["dur"]
        by_kernel[k["name"][:110]][1] += 1

    def table(title, rows):
        print(f"\n{title}")
        print(f"{'ms':>9} {'share':>6} {'calls':>6}  what")
        for key, (us, calls) in sorted(rows.items(), key=lambda kv: -kv[1][0])[: top]:
            label = " ".join(key) if isinstance(key, tuple) else key
            print(f"{us / 1e3:9.1f} {100 * us / max(total_us, 1):5.1f}% {calls:6d}  {label}")

    table("by operator and input shapes", by_op)
    table("by kernel", by_kernel)

    devices = sorted({k["args"].get("device", 0) for k in kernels})
    if len(devices) > 1:
        # A split run: each GPU's busy time within the common span, its copies, and its longest idle gaps.
        start = min(k["ts"] for k in kernels)
        for d in devices:
            mine = sorted((k for k in kernels if k["args"].get("device", 0) == d), key=lambda k: k["ts"])
            busy = sum(k["dur"] for k in mine)
            copies = [k for k in mine if k.get("cat") == "gpu_memcpy"]
            gaps, end = [], mine[0]["ts"]
            for k in mine:
                if k["ts"] > end:
                    gaps.append((k["ts"] - end, end - start))
                end = max(end, k["ts"] + k["dur"])
            gaps.sort(reverse=True)
            print(f"\ndevice {d}: busy {busy / 1e3:.1f} ms of {span_us / 1e3:.1f} ms ({100 * busy / max(span_us, 1):.0f}%), "
                  f"{len(mine)} kernels; copies {sum(k['dur'] for k in copies) / 1e3:.1f} ms in {len(copies)}; "
                  f"idle gaps: {len(gaps)}, {sum(g for g, _ in gaps) / 1e3:.1f} ms in all")
            print("  longest gaps (ms at ms): " + ", ".join(f"{g / 1e3:.2f} at {t / 1e3:.1f}" for g, t in gaps[:12]))
            kinds = collections.defaultdict(lambda: [0.0, 0])
            for k in copies:
                kinds[k["name"]][0] += k["dur"]
                kinds[k["name"]][1] += 1
            for name, (us, n) in sorted(kinds.items(), key=lambda kv: -kv[1][0])[:5]:
                print(f"  copy {name}: {us / 1e3:.1f} ms in {n}")


if __name__ == "__main__":
    main()
