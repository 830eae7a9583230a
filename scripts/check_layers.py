#!/usr/bin/env python3
"""Checks the project's layering by its includes (docs/architecture.md, "Layers"); prints each breach, exits 1.

usage: check_layers.py [REPOSITORY_ROOT]

Rules, on the transitive closure of each file's project includes ("app/...", "io/...", "core/..."):
  - app -> io -> core: no file under core/ reaches io/ or app/, none under io/ reaches app/;
  - nothing under core/models/, core/layers.*, core/kernels/ or core/device/ reaches the planner, the tiles, the
    band set or the engine (core/planner.h, core/tiling.h, core/tile_grid.h, core/band_set.h, core/engine.h);
  - the planner reaches no model registry (core/models/registry.h), the kernels no report (core/engine_report.h);
  - no header includes itself through others, and no two units of core or io (a .h and its .cpp) include
    each other;
  - no file under app/ includes anything under core/kernels/;
  - no source file has more than 600 lines.
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
FOLDERS = ("app", "io", "core")
SOURCES = (".h", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"((?:app|io|core)/[^"]+)"', re.M)
MAX_LINES = 600

files = {}
for top in FOLDERS:
    for folder, _, names in os.walk(os.path.join(ROOT, top)):
        for name in names:
            if name.endswith(SOURCES):
                path = os.path.relpath(os.path.join(folder, name), ROOT)
                with open(os.path.join(ROOT, path), encoding="utf-8") as f:
                    files[path] = f.read()

direct = {path: set(INCLUDE.findall(text)) for path, text in files.items()}


def reach(path):
    seen, stack = set(), [path]
    while stack:
        for inc in direct.get(stack.pop(), ()):
            if inc not in seen:
                seen.add(inc)
                stack.append(inc)
    return seen


breaches = []
TOP_FLOOR = {"core/planner.h", "core/tiling.h", "core/tile_grid.h", "core/band_set.h", "core/engine.h"}
for path in sorted(files):
    reached = reach(path)
    lines = files[path].count("\n")
    if lines > MAX_LINES:
        breaches.append(f"{path}: {lines} lines (at most {MAX_LINES})")
    if path.startswith("core/"):
        up = sorted(r for r in reached if not r.startswith("core/"))
        if up:
            breaches.append(f"{path} reaches {', '.join(up)} (core includes only core)")
    if path.startswith("io/"):
        up = sorted(r for r in reached if r.startswith("app/"))
        if up:
            breaches.append(f"{path} reaches {', '.join(up)} (io includes no app)")
    lower = path.startswith(("core/models/", "core/layers.", "core/kernels/", "core/device/"))
    if lower and reached & TOP_FLOOR:
        breaches.append(f"{path} reaches {', '.join(sorted(reached & TOP_FLOOR))} (models, layers, kernels and "
                        "devices stand below the planner, tiles, bands and engine)")
    if path.startswith("core/planner.") and "core/models/registry.h" in reached:
        breaches.append(f"{path} reaches core/models/registry.h (the request carries the calibration)")
    if path.startswith("core/kernels/") and "core/engine_report.h" in reached:
        breaches.append(f"{path} reaches core/engine_report.h (kernels count into core/kernel_log.h)")
    if path.startswith("app/"):
        kernels = sorted(i for i in direct[path] if i.startswith("core/kernels/"))
        if kernels:
            breaches.append(f"{path} includes {', '.join(kernels)} (app asks core, not its kernels)")
    if path.endswith(".h") and path in reached:
        breaches.append(f"{path} includes itself through others (a cycle)")

# Two units of core or io whose includes point at each other (a .cpp including the other's header while the
# other includes this one's).
def stem(path):
    return os.path.splitext(path)[0]

units = {}
for path, incs in direct.items():
    if not path.startswith(("core/", "io/")):
        continue
    units.setdefault(stem(path), set()).update(stem(i) for i in incs if stem(i) != stem(path))
for a in sorted(units):
    for b in sorted(units[a]):
        if a < b and a in units.get(b, ()):
            breaches.append(f"{a}.* and {b}.* include each other")

for line in breaches:
    print(line)
print(f"layering: {len(files)} files, {len(breaches)} breach{'es' if len(breaches) != 1 else ''}")
sys.exit(1 if breaches else 0)
