#!/usr/bin/env python3
"""Where a batch over devices spends its time: per device, the clips it ran, when its first began and its last
ended (seconds from the batch's first clip), its busy time and the sum of each stage (Note [Pipeline]).

  batch_timeline.py RUN.jsonl MANIFEST.jsonl

RUN.jsonl is the batch's --json output (a summary per clip), MANIFEST.jsonl its --manifest (the same clips
with the UTC time each ended)."""
import collections
import datetime
import json
import sys


def utc(text):
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()


def main(run_path, manifest_path):
    runs = {(r["input"], r["output"]): r for r in map(json.loads, open(run_path)) if r.get("status") == "ok"}
    spans = []
    for m in map(json.loads, open(manifest_path)):
        r = runs.get((m["input"], m["output"]))
        if r is None:
            continue
        end = utc(m["time"])
        spans.append((end - r["seconds"], end, r))
    if not spans:
        print("no clips ran")
        return
    origin = min(s for s, _, _ in spans)
    by_device = collections.defaultdict(list)
    for start, end, r in spans:
        by_device[r["device"]].append((start - origin, end - origin, r))
    wall = max(e for _, e, _ in spans) - origin
    print("clips %d, first start to last end %.1f s" % (len(spans), wall))
    for device in sorted(by_device):
        rows = sorted(by_device[device], key=lambda x: x[0])
        stages = collections.Counter()
        for _, _, r in rows:
            stages.update(r.get("stage_seconds") or {})
        busy = sum(e - s for s, e, _ in rows)
        gaps = sum(max(0.0, b[0] - a[1]) for a, b in zip(rows, rows[1:]))
        print("%s: %d clips, %.1f..%.1f s, busy %.1f s (runs overlap by %.1f s), gaps %.1f s; per clip %.2f s; "
              "stages %s" % (device, len(rows), rows[0][0], rows[-1][1], busy,
                             max(0.0, busy - (rows[-1][1] - rows[0][0]) + gaps), gaps, busy / len(rows),
                             ", ".join("%s %.1f" % kv for kv in sorted(stages.items()))))


if __name__ == "__main__":
    main(*sys.argv[1:3])
