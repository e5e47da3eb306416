"""``python -m servelib.measure [--quick] [--dtype D] [--device K] --out profile.json``

Measures this machine's hardware profile (see :func:`servelib.measure.profile.measure_profile`)
and writes it as JSON, printing progress as it goes.
"""
from __future__ import annotations

import argparse
import os
import sys

from .device import pick_device
from .profile import measure_profile, save_profile


def main(argv=None) -> int:
    """Command line ``python -m servelib.measure [--quick] --out PROFILE.json [--dtype D] [--device K]``.

    Measures the device and writes the profile (see :func:`servelib.measure.measure_profile`).
    Returns the exit status: 0 when written, 2 for a usage error (an unavailable device, an
    ``--out`` that is a folder) reported before anything is measured.
    """
    ap = argparse.ArgumentParser(
        prog="python -m servelib.measure",
        description="Measure this machine (copy bandwidth, matmul FLOP/s, prefill and decode of a toy "
                    "decoder, a batching sweep) and write the hardware profile as JSON.")
    ap.add_argument("--quick", action="store_true", help="smaller sizes: under a minute on a 2-core CPU")
    ap.add_argument("--out", required=True, help="where to write the profile JSON")
    ap.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default=None,
                    help="measurement dtype (default: the device's)")
    ap.add_argument("--device", choices=("cuda", "mps", "cpu"), default=None,
                    help="device (default: CUDA, else MPS, else CPU)")
    args = ap.parse_args(argv)
    # Refuse what would fail only after minutes of measuring: a missing device, an output
    # path that is a folder.
    if os.path.isdir(args.out):
        ap.error(f"--out {args.out} is a folder; give a file name such as {os.path.join(args.out, 'profile.json')}")
    try:
        device = pick_device(args.device)
    except RuntimeError as err:
        ap.error(f"--device: {err}")
    prof = measure_profile(quick=args.quick, device=device, dtype=args.dtype,
                           progress=lambda line: print(line, flush=True))
    path = save_profile(prof, args.out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
