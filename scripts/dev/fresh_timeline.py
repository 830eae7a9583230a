#!/usr/bin/env python3
"""Where a fresh process's wall clock goes: run a vaecodec command with its stderr on a pseudo-terminal (so the
progress line redraws every 0.1 s) and print every message and progress state with the seconds since the
process was started, then the exit.

    scripts/dev/fresh_timeline.py build/vaecodec decode lat.safetensors -o out.mp4 --verbose

The first progress line is the first frame done (start-up: libraries, CUDA, weights, the model, the first
chunk); the last is the model's last frame; "done" is printed once the writer has finished; the exit follows
the teardown (CUDA context, allocator, threads).
"""
import os
import pty
import re
import subprocess
import sys
import time


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    master, slave = pty.openpty()
    start = time.monotonic()
    proc = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    buffer = b""
    last_progress = None
    progress_re = re.compile(r"(\d+)(?:/\d+)? frames")
    events = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        now = time.monotonic() - start
        buffer += data
        parts = re.split(rb"[\r\n]", buffer)
        buffer = parts.pop()
        for part in parts:
            line = part.decode(errors="replace").strip()
            if not line:
                continue
            if progress_re.search(line) and "done" not in line:
                if last_progress is None:
                    events.append((now, "first progress: " + line))
                last_progress = (now, line)
                continue
            events.append((now, line))
    out = proc.stdout.read().decode(errors="replace")
    rc = proc.wait()
    end = time.monotonic() - start
    if last_progress:
        events.append((last_progress[0], "last progress: " + last_progress[1]))
    events.sort(key=lambda e: e[0])
    for t, line in events:
        print("  %7.3f s  %s" % (t, line[:160]))
    if out.strip():
        print("  %7.3f s  (stdout) %s" % (end, out.strip().splitlines()[-1][:160]))
    print("  %7.3f s  exit %d" % (end, rc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
