#!/usr/bin/env python3
"""Where a batch over devices spends its time: per device, the clips it ran, when its first began and its last
ended (seconds from the batch's first clip), its busy time and the sum of each stage (Note [Pipeline]).

  batch_timeline.py RUN.jsonl

RUN.jsonl is the batch's --json output: a summary per clip, with when it started (Unix seconds) and its
seconds, opening to renaming."""
import collections
import json
import sys


def main(run_path):
    spans = [(r["started"], r["started"] + r["seconds"], r)
             for r in map(json.loads, open(run_path)) if r.get("status") == "ok" and r.get("started")]
    if not spans:
        print("no clips ran")
        return
    origin = min(s for s, _, _ in spans)
    by_device = collections.defaultdict(list)
    for start, end, r in spans:
        by_device[r["device"]].append((start - origin, end - origin, r))
    print("clips %d, first start to last end %.1f s" % (len(spans), max(e for _, e, _ in spans) - origin))
    for device in sorted(by_device):
        rows = sorted(by_device[device], key=lambda x: x[0])
        stages = collections.Counter()
        for _, _, r in rows:
            stages.update(r.get("stage_seconds") or {})
        gaps = sum(max(0.0, b[0] - a[1]) for a, b in zip(rows, rows[1:]))
        overlap = sum(max(0.0, a[1] - b[0]) for a, b in zip(rows, rows[1:]))
        print("%s: %d clips, %.1f..%.1f s, gaps %.1f s, overlapping %.1f s; per clip %.2f s; stages %s"
              % (device, len(rows), rows[0][0], rows[-1][1], gaps, overlap,
                 (rows[-1][1] - rows[0][0]) / len(rows), ", ".join("%s %.1f" % kv for kv in sorted(stages.items()))))


if __name__ == "__main__":
    main(sys.argv[1])
