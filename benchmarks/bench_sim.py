"""Simulator throughput: how fast servelib.sim runs a large workload on one core.

    python benchmarks/bench_sim.py [--repeats 5]

10,000 requests queued at t = 0, 512-token prompts, exponential outputs with mean 256
tokens (about 2.56 M decode tokens), continuous batching with max_batch=256 and a
constant 20 ms step. Four variants: unlimited contiguous KV; a paged cache of 16-token
blocks (256 x 1,024 tokens); and over-commit on a tighter 150,000-token paged cache, with
recompute preemption and with swap preemption (each token copied costs Llama-3-8B's KV bytes
over an H100's host link, PCIe Gen5 x16). Prints the median wall time of the repeats (the machine may
be shared: take medians, not minima or single runs).
"""
from __future__ import annotations

import argparse
import statistics
import time

from servelib.models import get_model
from servelib.sim import simulate, swap_s_per_token, workloads

VARIANTS = {
    "contiguous, no KV limit": {},
    "paged, block_size=16": dict(block_size=16, kv_capacity_tokens=256 * 1024),
    "paged + recompute preemption": dict(block_size=16, kv_capacity_tokens=150_000, admission="prompt",
                                         preemption="recompute"),
    "paged + swap preemption": dict(block_size=16, kv_capacity_tokens=150_000, admission="prompt",
                                    preemption="swap",
                                    swap_s_per_token=swap_s_per_token(get_model("llama-3-8b"), "h100-sxm")),
}


def main(repeats: int = 5) -> None:
    outs = workloads.output_lengths(10_000, 256, 1.0, seed=0)
    reqs = workloads.make_requests(0.0, 512, outs)
    print(f"10,000 requests, {outs.sum():,} output tokens, max_batch=256, {repeats} repeats (median)")
    for name, kw in VARIANTS.items():
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            r = simulate(reqs, max_batch=256, step_time_s=0.02, **kw)
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        print(f"{name:<30} {med:6.3f} s  {r.n_steps:>6,} steps  {outs.sum() / med / 1e6:5.1f} M tokens/s  "
              f"completed {r.n_completed:,}  preempted {r.n_preempted:,}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="runs of each variant (>= 1); the median is printed")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    main(args.repeats)
