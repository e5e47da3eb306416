"""The measurement figures of the prefill, roofline and batching chapters on this machine.

    python benchmarks/bench_measure.py [--repeats 3] [--full]

Runs ``python -m servelib.measure --quick`` (and the full profile with ``--full``)
``--repeats`` times in fresh processes and prints the median of each figure:
- decode seconds per token over prefill seconds per token (batch 1);
- decode at batch 1: achieved bytes/s as a fraction of the measured copy bandwidth;
- batching: decode tokens/s at the largest batch over batch 1;
- prediction: the worst ratio max(predicted/measured, measured/predicted) over prefill,
  decode and every batch of the sweep, each predicted from the measured ceilings by the
  roofline (the larger of compute and memory time) and, for comparison, by their sum;
- wall time of the profile command.
Timings vary with whatever else the machine runs; the medians damp that, not remove it.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def figures(p: dict) -> dict:
    sweep = p["batching_sweep"]
    def worst(key):
        pairs = [(p[ph][key], p[ph]["step_s"]) for ph in ("prefill", "decode")]
        pairs += [(s[key], s["step_s"]) for s in sweep]
        return max(max(a / b, b / a) for a, b in pairs)

    return {
        "decode/prefill per token": p["decode"]["s_per_token"] / p["prefill"]["s_per_token"],
        "decode b1 / copy bandwidth": p["decode"]["achieved_Bps"] / p["copy_bandwidth_Bps"],
        "tokens/s gain, largest batch / 1": sweep[-1]["tokens_per_s"] / sweep[0]["tokens_per_s"],
        "worst prediction ratio (roofline)": worst("predicted_step_s"),
        "worst ratio, no-overlap prediction": worst("predicted_serial_s"),
        "copy bandwidth GB/s": p["copy_bandwidth_Bps"] / 1e9,
        "matmul TFLOP/s": p["matmul_flops"] / 1e12,
    }


def run(quick: bool) -> tuple[dict, float, dict]:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "p.json")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "servelib.measure", *(["--quick"] if quick else []), "--out", out],
                       check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        with open(out) as fh:
            prof = json.load(fh)
    return figures(prof), wall, prof


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    ap.add_argument("--repeats", type=int, default=3,
                    help="profiles measured, each in a fresh process (>= 1); medians are printed")
    ap.add_argument("--full", action="store_true", help="also the full (non-quick) profile")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    for quick in ([True, False] if args.full else [True]):
        runs = [run(quick) for _ in range(args.repeats)]
        dev = runs[0][2]["device"]
        print(f"== {'--quick' if quick else 'full'} profile, {args.repeats} runs, median (min..max)")
        print(f"   device {dev['kind']} ({dev['name']}), {dev.get('threads')} threads, dtype {runs[0][2]['dtype']}, "
              f"torch {runs[0][2]['torch']}, model {runs[0][2]['model']['name']} "
              f"({runs[0][2]['model']['n_params'] / 1e6:.0f}M params)")
        keys = list(runs[0][0]) + ["wall s"]
        for k in keys:
            vals = [r[1] if k == "wall s" else r[0][k] for r in runs]
            print(f"   {k:<34} {statistics.median(vals):8.2f}  ({min(vals):.2f}..{max(vals):.2f})")
        prof = runs[0][2]
        print("   first run, measured / predicted ms: "
              + "  ".join(f"{ph} {prof[ph]['step_s'] * 1e3:.1f}/{prof[ph]['predicted_step_s'] * 1e3:.1f}"
                          for ph in ("prefill", "decode")))
        print("   first run's sweep (batch: measured / predicted ms): "
              + "  ".join(f"{s['batch']}: {s['step_s'] * 1e3:.1f}/{s['predicted_step_s'] * 1e3:.1f}"
                          for s in prof["batching_sweep"]))


if __name__ == "__main__":
    main()
