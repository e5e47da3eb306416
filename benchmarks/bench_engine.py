"""The serving engine measured: its overhead over the bare decoder, and the simulator held to it.

    python benchmarks/bench_engine.py [--threads N] [--json out.json] [--skip-overhead]

1. Engine overhead. The measurement chapters' toy decoder (``servelib.measure.toy_spec``, the
   profile's quick size) timed bare (``servelib.measure.time_decode``: one forward pass over a
   contiguous cache, median of repeats) and inside the engine (whole iterations: scheduling,
   block tables, forward, sampling; median of a run's decode steps) at batch 1 and batch 32,
   same context. Targets: batch 1 at most 1.25x the bare step; batch 32 at least 80% of the
   bare tokens/s.
2. Simulator vs engine. The engine's toy calibrates a step-time model from its warm-up
   (``servelib.engine.calibrate``), then runs the uneven-outputs backlog (continuous and static)
   and chat traffic replayed at 50% and 90% of the predicted capacity; the simulator predicts
   each with the same scheduler. Printed: predicted, measured and error for makespan, mean
   latency, TTFT p50/p99 and TPOT p50 (goal: within 15%), and the same with a model refitted
   to each run's own steps (what is left once the machine's drift between warm-up and run is
   taken out), and the drift itself: the calibrated model's sum over the run's own steps
   against the measured sum. ``--clock cpu`` reads the thread's CPU time instead of the wall clock: on a
   machine shared with other work this takes the other work's delays out (a diagnostic).

Timings on a machine shared with other work are noisy: every figure is printed with the device,
dtype, threads and versions; run it on a quiet machine for figures to quote.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import numpy as np
import torch

from servelib.engine import Engine, calibrate, capacity_rps, compare, predict, step_overhead
from servelib.engine import workloads as ew
from servelib.measure import ToyDecoder, pick_device, toy_spec
from servelib.measure.profile import profile_plan
from servelib.sim import fit_step_time


def overhead(device) -> dict:
    """Engine decode iterations vs the bare toy decoder's forward pass, batch 1 and 32."""
    plan = profile_plan(device, quick=True)
    model = ToyDecoder(toy_spec(device, plan["size"]), device)
    engine = Engine(model=model)
    ctx = plan["context_len"]
    out = {"model": model.spec.name, "context_len": ctx}
    for b in (1, 32):
        o = step_overhead(engine, b, ctx)
        out[f"batch{b}"] = dict(bare_step_s=o.bare_s, engine_step_s=o.engine_s, ratio=o.ratio,
                                bare_tokens_per_s=b / o.bare_s, engine_tokens_per_s=b / o.engine_s)
        print(f"batch {b:>2}, context {ctx}: bare {o.bare_s * 1e3:7.2f} ms, engine {o.engine_s * 1e3:7.2f} ms/step "
              f"({o.ratio:.2f}x the bare step, median of back-to-back rounds; tokens/s {1 / o.ratio:.0%} of the bare "
              f"decoder's)")
    return out


def sim_vs_engine(engine: Engine, clock=time.perf_counter) -> dict:
    """Calibrate, run the four workloads, and print predicted vs measured."""
    reqs_u, kw_u = ew.uneven(0)
    probe, kw_c = ew.chat(1.0, 0)
    max_ctx = max(max(r.final_len for r in reqs_u), max(r.final_len for r in probe))
    max_chunk = max(max(r.prompt_len for r in probe) * 4, 256)
    t0 = time.perf_counter()
    cal = calibrate(engine, max_batch=max(kw_u["max_batch"], kw_c["max_batch"]), max_context=max_ctx,
                    max_chunk=max_chunk, progress=lambda line: print("   ", line), clock=clock)
    print(f"calibrated in {time.perf_counter() - t0:.1f} s: {len(cal.steps)} steps, median step error "
          f"{cal.median_abs_error:.1%}, total {cal.total_error:+.1%}")
    for name, value in zip(cal.model.__dataclass_fields__, cal.model.coefficients):
        print(f"    {name:<20} {value:.3e} s")
    cap = capacity_rps(probe, cal.model, **kw_c)
    print(f"predicted capacity of the chat replica: {cap:.1f} requests/s")
    cases = {
        "uneven, continuous": (reqs_u, dict(kw_u, policy="continuous")),
        "uneven, static": (reqs_u, dict(kw_u, policy="static")),
    }
    for load in (0.5, 0.9):
        reqs, kw = ew.chat(load * cap, 0)
        cases[f"Poisson at {load:.0%} load"] = (reqs, kw)
    table = {}
    print(f"\n{'workload':<22}{'figure':<16}{'measured':>10}{'predicted':>11}{'error':>8}{'in-run fit':>12}")
    for name, (reqs, kw) in cases.items():
        run = engine.run(reqs, clock=clock, **kw)
        pred = predict(reqs, cal.model, **kw)
        refit = fit_step_time(run.steps, run.result.trace.step_s)
        again = predict(reqs, refit, **kw)
        rows = compare(run.result, pred)
        rows_in = compare(run.result, again)
        # The calibrated model on this run's own steps: how much slower or faster the machine
        # ran than at the warm-up, before any queueing magnifies it.
        drift = sum(cal.model.of_step(s) for s in run.steps) / float(run.result.trace.step_s.sum()) - 1
        table[name] = [dict(figure=k, measured=m, predicted=p, error=e, in_run_error=ei)
                       for (k, m, p, e), (_, _, _, ei) in zip(rows, rows_in)]
        table[name].append(dict(figure="sum_of_steps_s", error=drift))
        for (k, m, p, e), (_, _, _, ei) in zip(rows, rows_in):
            print(f"{name:<22}{k:<16}{m:>10.4f}{p:>11.4f}{e:>+8.1%}{ei:>+12.1%}")
        print(f"{name:<22}{'its steps':<16}{'':>21}{drift:>+8.1%}   (the fitted model on the run's own steps)")
    return dict(calibration={k: getattr(cal.model, k) for k in cal.model.__dataclass_fields__},
                capacity_rps=cap, table=table)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None,
                    help="torch CPU threads (default: 1 on a CPU, where a busy machine makes a second "
                         "thread wait at every barrier; ignored on a GPU)")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    ap.add_argument("--skip-overhead", action="store_true", help="only the simulator-vs-engine table")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall: the wall clock (default); cpu: only the time this thread ran, which takes other "
                         "work on a shared CPU out of the table (a diagnostic; one thread)")
    args = ap.parse_args()
    if args.threads is not None and args.threads < 1:
        ap.error("--threads must be >= 1")
    device = pick_device()
    if device.kind == "cpu":
        torch.set_num_threads(args.threads or 1)
    engine = Engine("small", device=device)
    print(f"device: {device}, {torch.get_num_threads()} threads, python {platform.python_version()}, "
          f"numpy {np.__version__}")
    doc = dict(device=device.as_dict(), threads=torch.get_num_threads(), torch=torch.__version__,
               date=time.strftime("%Y-%m-%d"))
    if not args.skip_overhead:
        print("\n1. engine overhead (the measurement chapters' toy decoder)")
        doc["overhead"] = overhead(device)
    print(f"\n2. simulator vs engine, on\n{engine}")
    doc["engine"] = str(engine)
    if args.clock == "cpu" and (device.kind != "cpu" or torch.get_num_threads() != 1):
        ap.error("--clock cpu needs a CPU run with one thread")
    doc["clock"] = args.clock
    doc["sim_vs_engine"] = sim_vs_engine(engine, time.thread_time if args.clock == "cpu" else time.perf_counter)
    errs = [abs(r["error"]) for rows in doc["sim_vs_engine"]["table"].values() for r in rows
            if r["figure"] != "sum_of_steps_s"]
    print(f"\nlargest error {max(errs):.1%}, median {statistics.median(errs):.1%} (goal: within 15%)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(doc, fh, indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
