#!/usr/bin/env python3
"""Prints what this machine offers the tests that need more than a CPU: "GPUS HOPPER", the number of CUDA devices
and 1 where the first one runs the own Hopper kernels of this build (else 0), from `vaecodec info --json`
(Note [Tests that cannot run here] in tests/gpu_support.h). Prints "0 0" where vaecodec cannot tell.

usage: test_needs.py PATH_TO_VAECODEC
"""
import json
import subprocess
import sys

try:
    info = json.loads(subprocess.run([sys.argv[1], "info", "--json"], capture_output=True, text=True,
                                     timeout=120).stdout)
except (OSError, ValueError, subprocess.SubprocessError):
    info = {}
gpus = info.get("gpus") or []
hopper = bool(info.get("hopper_conv_kernels")) and bool(gpus) and gpus[0].get("compute_capability") == "9.0"
print(len(gpus), int(hopper))
