"""``python -m servelib.engine --workload uneven --policy continuous --out run.json``

Runs a workload through the engine on this machine, and the same workload through the
simulator with a step-time model fitted to this machine a moment before; prints both and
writes them as JSON.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import pathlib
import sys

#: Figures of a run written to ``run.json`` (and, under ``"predicted"``, the simulator's).
KEYS = ("makespan_s", "mean_latency_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "itl_p99_s",
        "throughput_tokens_per_s", "n_completed", "n_preempted", "goodput_rps")


def _row(name, measured, predicted):
    if measured is None or predicted is None:
        return f"{name:<26}{'-':>12}{'-':>12}{'':>9}"
    err = f"{predicted / measured - 1:+8.1%}" if measured else ""
    return f"{name:<26}{measured:>12.4g}{predicted:>12.4g}{err:>9}"


def main(argv=None) -> int:
    """Command line: run a workload on the engine, predict it with the simulator, print, write JSON.

    Returns the exit status: 0 when written, 2 for a usage error (reported before anything runs).
    """
    from ..measure import pick_device
    from .workloads import WORKLOADS, make_workload

    ap = argparse.ArgumentParser(
        prog="python -m servelib.engine",
        description="Serve a workload with the toy engine on this machine and with the simulator "
                    "(step times fitted to this machine first); print both, write them as JSON.")
    ap.add_argument("--workload", choices=WORKLOADS, default="uneven",
                    help="uneven: an offline backlog of exponential outputs; poisson / bursty: chat traffic "
                         "replayed at --rate (default: uneven)")
    ap.add_argument("--policy", choices=("continuous", "static"), default="continuous")
    ap.add_argument("--block-size", type=int, default=16, help="tokens per KV block (default 16)")
    ap.add_argument("--rate", type=float, default=None,
                    help="arrival rate in requests/s for poisson and bursty (default: half the predicted capacity)")
    ap.add_argument("--max-batched-tokens", type=int, default=None, help="chunked prefill: tokens per step")
    ap.add_argument("--slo-ttft", type=float, default=0.5, help="TTFT objective for goodput, s (default 0.5)")
    ap.add_argument("--slo-tpot", type=float, default=0.05, help="TPOT objective for goodput, s (default 0.05)")
    ap.add_argument("--requests", type=int, default=None,
                    help="number of requests (default: the workload's, 184 for uneven, 200 otherwise)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--size", choices=("tiny", "small"), default="small", help="toy model size (default small)")
    ap.add_argument("--device", choices=("cuda", "mps", "cpu"), default=None,
                    help="device (default: CUDA, else MPS, else CPU)")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch CPU threads (default on a CPU: 1, since on a machine shared with other work a "
                         "second thread waits at every synchronisation for a busy core and step times jump)")
    ap.add_argument("--out", required=True, help="where to write the run as JSON")
    args = ap.parse_args(argv)
    if os.path.isdir(args.out):
        ap.error(f"--out {args.out} is a folder; give a file name such as {os.path.join(args.out, 'run.json')}")
    if args.block_size < 1:
        ap.error("--block-size must be >= 1")
    if args.rate is not None and not 0 < args.rate < math.inf:
        ap.error("--rate must be finite and > 0 requests/s")
    if args.rate is not None and args.workload == "uneven":
        ap.error("--rate applies to the poisson and bursty workloads; uneven is an offline backlog")
    if args.requests is not None and args.requests < 1:
        ap.error("--requests must be >= 1")
    if args.seed < 0:
        ap.error("--seed must be >= 0")
    if args.threads is not None and args.threads < 1:
        ap.error("--threads must be >= 1")
    for name in ("slo_ttft", "slo_tpot"):
        if not 0 < getattr(args, name) < math.inf:
            ap.error(f"--{name.replace('_', '-')} must be finite and > 0 s")
    try:
        device = pick_device(args.device)
    except RuntimeError as err:
        ap.error(f"--device: {err}")
    # The workload's own sizes bound the rest: drawn now (cheap), so a misfit is a usage
    # error before the model is built or the warm-up runs.
    try:
        probe, probe_kw = make_workload(args.workload, rate_per_s=args.rate or 1.0, seed=args.seed, n=args.requests)
    except ValueError as err:     # arrivals that overflow a float at an absurdly low --rate, say
        ap.error(f"--rate / --requests: {err}")
    if args.max_batched_tokens is not None and args.max_batched_tokens < probe_kw["max_batch"]:
        ap.error(f"--max-batched-tokens must be >= {probe_kw['max_batch']}, the workload's batch of sequences "
                 "(each decodes one token a step)")
    if args.block_size > probe_kw["kv_capacity_tokens"]:
        ap.error(f"--block-size must be <= {probe_kw['kv_capacity_tokens']} tokens, the workload's KV pool")

    import torch

    from .calibrate import calibrate, predict
    from .engine import Engine

    if device.kind == "cpu":
        torch.set_num_threads(args.threads or 1)
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    engine = Engine(args.size, device=device, seed=args.seed)
    say(f"engine: {engine}")
    max_ctx = max(r.final_len for r in probe)
    chunk = args.max_batched_tokens or max(r.prompt_len for r in probe)
    cal = calibrate(engine, max_batch=probe_kw["max_batch"], max_context=max_ctx, max_chunk=chunk,
                    block_size=args.block_size, progress=say)
    say(f"step-time model: median step error {cal.median_abs_error:.1%}, total {cal.total_error:+.1%} "
        f"over {len(cal.steps)} warm-up steps")
    rate = args.rate
    if args.workload != "uneven" and rate is None:
        # Capacity: the simulator's requests/s for the same requests all queued at once.
        full = predict(probe, cal.model, policy=args.policy, block_size=args.block_size,
                       max_batched_tokens=args.max_batched_tokens, **{**probe_kw, "offline": True})
        rate = 0.5 * full.request_throughput_rps
        say(f"predicted capacity {full.request_throughput_rps:.2f} requests/s; replaying at half: {rate:.2f}/s")
    reqs, kw = make_workload(args.workload, rate_per_s=rate, seed=args.seed, n=args.requests)
    kw.update(policy=args.policy, block_size=args.block_size, max_batched_tokens=args.max_batched_tokens)
    run = engine.run(reqs, progress=True, **kw)
    pred = predict(reqs, cal.model, **kw)
    slo = dict(ttft_slo_s=args.slo_ttft, tpot_slo_s=args.slo_tpot)
    measured, predicted = run.result.summary(**slo), pred.summary(**slo)
    print(f"{args.workload} workload, {args.policy} batching, {len(reqs)} requests on {engine}")
    print(f"{'':<26}{'measured':>12}{'predicted':>12}{'error':>9}")
    for k in KEYS:
        print(_row(k, measured.get(k), predicted.get(k)))
    doc = {k: measured.get(k) for k in KEYS}
    doc["predicted"] = {k: predicted.get(k) for k in KEYS}
    doc.update(
        workload=args.workload, policy=args.policy, rate_per_s=rate, seed=args.seed, config=run.config,
        measured=measured, predicted_full=predicted,
        device=device.as_dict(), threads=torch.get_num_threads(), engine=str(engine),
        step_time_model={k: getattr(cal.model, k) for k in cal.model.__dataclass_fields__},
        step_time_model_median_error=cal.median_abs_error,
        date=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), wall_s=run.wall_s,
        kv_blocks_over_time={"end_s": run.result.trace.end_s.tolist(),
                             "blocks": (run.result.trace.kv_allocated_tokens // args.block_size).tolist()})
    path = pathlib.Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
