#!/usr/bin/env python3
"""What is alive on the device at the peak of a `vaecodec bench --trace` Chrome trace (Kineto, with memory).

Replays the caching allocator's allocations and frees of one device up to the moment its total allocated
was highest, and prints what was alive then, grouped by the host operator that allocated it (its name and
first input shapes), largest first; then the operators running at the peak. Usage:
    trace_memory.py TRACE.json [--top N] [--device N]
"""
import argparse
import bisect
import collections
import json

import trace_events


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("trace")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--device", type=int, default=0, help="CUDA device; -1: the host's allocations")
    args = parser.parse_args()
    events = json.load(open(args.trace))["traceEvents"]
    device_type = 0 if args.device < 0 else 1  # Kineto's: 0 the host, 1 CUDA
    memory = sorted((e for e in events if e.get("name") == "[memory]" and e["args"].get("Device Type") == device_type
                     and e["args"].get("Device Id") == args.device), key=lambda e: e["ts"])
    if not memory:
        raise SystemExit(f"{args.trace}: no allocations of device {args.device} (traced without memory?)")
    cpu_ops = sorted((e for e in events if e.get("cat") == "cpu_op"), key=lambda e: e["ts"])
    starts = [op["ts"] for op in cpu_ops]

    bare = ("aten::empty", "aten::empty_strided", "aten::empty_like", "aten::resize_", "aten::zeros",
            "aten::new_empty", "aten::new_empty_strided")

    def maker(event):
        """The innermost host operator of the event's thread running when it happened, past the bare
        allocations (aten::empty and such) to the operator that asked for them."""
        i = bisect.bisect_right(starts, event["ts"]) - 1
        inner = None
        while i >= 0 and starts[i] >= event["ts"] - 600e6:
            op = cpu_ops[i]
            if op.get("tid") == event.get("tid") and op["ts"] + op.get("dur", 0) >= event["ts"]:
                inner = inner or op
                if op["name"] not in bare:
                    return op
            i -= 1
        return inner

    peak_at = max(range(len(memory)), key=lambda i: memory[i]["args"]["Total Allocated"])
    peak = memory[peak_at]
    live = {}
    for e in memory[: peak_at + 1]:
        a = e["args"]
        if a["Bytes"] > 0:
            live[a["Addr"]] = e
        else:
            live.pop(a["Addr"], None)
    total = peak["args"]["Total Allocated"]
    print(f"peak allocated {total / 2**30:.2f} GiB (reserved {peak['args']['Total Reserved'] / 2**30:.2f}) "
          f"at {(peak['ts'] - memory[0]['ts']) / 1e6:.3f} s; {len(live)} blocks alive, "
          f"{sum(e['args']['Bytes'] for e in live.values()) / 2**30:.2f} GiB of them allocated in the trace")
    groups = collections.defaultdict(lambda: [0, 0])
    for e in live.values():
        op = maker(e)
        key = (op["name"], trace_events.shapes(op, 3)) if op else ("(no operator)", "")
        groups[key][0] += e["args"]["Bytes"]
        groups[key][1] += 1
    print(f"\n{'GiB':>8} {'blocks':>6}  allocated by")
    for (name, shapes), (size, count) in sorted(groups.items(), key=lambda kv: -kv[1][0])[: args.top]:
        print(f"{size / 2**30:8.3f} {count:6d}  {name} {shapes}")
    running = [op for op in cpu_ops if op["ts"] <= peak["ts"] <= op["ts"] + op.get("dur", 0)]
    print("\nrunning at the peak:")
    for op in running:
        print(f"  {op['name']} {trace_events.shapes(op, 3)}")


if __name__ == "__main__":
    main()
