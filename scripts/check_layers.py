#!/usr/bin/env python3
"""Checks the project's layering by its includes (docs/architecture.md, "Layers"); prints each breach, exits 1.

usage: check_layers.py [REPOSITORY_ROOT]

Rules, on the transitive closure of each file's project includes ("app/...", "io/...", "core/..."):
  - app -> io -> core: no file under core/ reaches io/ or app/, none under io/ reaches app/;
  - nothing under core/models/, core/layers.*, core/kernels/ or core/device/ reaches the planner, the splits or
    the engine (core/planner.h, core/tile_grid.h, anything under core/split/, core/engine.h);
  - the planner reaches no model registry (core/models/registry.h), the kernels no report (core/engine_report.h);
  - no header includes itself through others, and no two units of core, io or app (a .h and its .cpp) include
    each other (app/batch.* holds a batch's types, app/run_command.* the stages that run every kind of batch);
  - no file under app/ includes anything under core/kernels/;
  - io/, app/ and the Python binding (python/src/) reach the placement rooms - where a chunk runs: the kinds of
    split under core/split/ (whole, blended tiles, bands, exact tiles) and the exchange between bands - only
    through core/engine.h: io and app ask the engine to run a plan and never name how it is split. What they
    need beside the engine has a small header of its own: a band's place (core/place.h), the planner's band
    rows and band plans (core/planner.h), the exchange's byte counts that `bench --devices` prints
    (core/band_traffic.h), the workers, one per place, that a batch over devices and `bench --devices` run on
    (core/split/places.h, no room of its own);
  - no source file has more than 600 lines.
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
FOLDERS = ("app", "io", "core")
FRONT_ENDS = ("python/src",)  # the Python binding: held to the placement rule and the length rule
SOURCES = (".h", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"((?:app|io|core)/[^"]+)"', re.M)
MAX_LINES = 600

files = {}
for top in FOLDERS + FRONT_ENDS:
    for folder, _, names in os.walk(os.path.join(ROOT, top)):
        for name in names:
            if name.endswith(SOURCES):
                path = os.path.relpath(os.path.join(folder, name), ROOT)
                with open(os.path.join(ROOT, path), encoding="utf-8") as f:
                    files[path] = f.read()

direct = {path: set(INCLUDE.findall(text)) for path, text in files.items()}


def reach(path, through=lambda inc: True):
    """The project files `path` includes, directly or through others; only those for which `through` holds are
    followed further."""
    seen, stack = set(), [path]
    while stack:
        for inc in direct.get(stack.pop(), ()):
            if inc not in seen:
                seen.add(inc)
                if through(inc):
                    stack.append(inc)
    return seen


# Where a chunk runs (the module docstring): io, app and python reach these only through the engine.
PLACEMENT = {"core/band_exchange.h"}
ENGINE = "core/engine.h"


WORKERS = "core/split/places.h"  # the pool every room and the batch over devices run on: not a room


def placement_room(path):
    return path in PLACEMENT or (path.startswith("core/split/") and path != WORKERS)


breaches = []
TOP_FLOOR = {"core/planner.h", "core/tile_grid.h", "core/engine.h"}
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
    above = sorted(r for r in reached if r in TOP_FLOOR or r.startswith("core/split/"))
    if lower and above:
        breaches.append(f"{path} reaches {', '.join(above)} (models, layers, kernels and devices stand below the "
                        "planner, the splits and the engine)")
    if path.startswith("core/planner.") and "core/models/registry.h" in reached:
        breaches.append(f"{path} reaches core/models/registry.h (the request carries the calibration)")
    if path.startswith("core/kernels/") and "core/engine_report.h" in reached:
        breaches.append(f"{path} reaches core/engine_report.h (kernels count into core/kernel_log.h)")
    if path.startswith(("io/", "app/") + FRONT_ENDS):
        rooms = sorted(r for r in reach(path, through=lambda inc: inc != ENGINE) if placement_room(r))
        if rooms:
            breaches.append(f"{path} reaches {', '.join(rooms)} other than through {ENGINE} (io, app and "
                            "python ask the engine, not the rooms where a chunk runs)")
    if path.startswith("app/"):
        kernels = sorted(i for i in direct[path] if i.startswith("core/kernels/"))
        if kernels:
            breaches.append(f"{path} includes {', '.join(kernels)} (app asks core, not its kernels)")
    if path.endswith(".h") and path in reached:
        breaches.append(f"{path} includes itself through others (a cycle)")

# Two units of core, io or app whose includes point at each other (a .cpp including the other's header while the
# other includes this one's).
def stem(path):
    return os.path.splitext(path)[0]

units = {}
for path, incs in direct.items():
    if not path.startswith(("core/", "io/", "app/")):
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
