"""The engine's warm-up: a few short runs whose steps fit the simulator's step-time model.

A step's cost depends on its shape: how many tokens go through the matrix products, how many
rows need logits, how many keys decode attention reads, how many prefill chunks it holds and
how long they are. :func:`calibrate` runs a small designed workload through the engine (its
real loop: scheduling, batch building, forward pass, sampling, clock) so that those
quantities vary widely, and fits a :class:`servelib.sim.StepTimeModel` to every step it
measured. The simulator, given that model, predicts the engine's runs (:func:`predict`).

Every step is fitted, not a median per shape: a run's makespan is the *sum* of its steps, so
on a machine that other work slows now and then the model must carry the mean step time,
delays included.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from .. import _check
from ..sim import Request, StepTimeModel, fit_step_time, simulate
from .engine import Engine
from .model import warm_shapes


@dataclass(frozen=True)
class Calibration:
    """A fitted step-time model and the measurements behind it.

    ``model``: the :class:`servelib.sim.StepTimeModel`. ``steps`` and ``seconds``: every step
    of the warm-up runs and its measured duration; ``fitted``: the model's duration for each.
    ``wall_s``: how long the calibration took.
    """

    model: StepTimeModel
    steps: tuple
    seconds: np.ndarray
    fitted: np.ndarray
    wall_s: float

    @property
    def median_abs_error(self) -> float:
        """Median over the warm-up steps of |fitted - measured| / measured."""
        return float(np.median(np.abs(self.fitted - self.seconds) / self.seconds))

    @property
    def total_error(self) -> float:
        """(sum of fitted - sum of measured) / sum of measured: how well the model adds up."""
        return float(self.fitted.sum() / self.seconds.sum() - 1)


def warmup_runs(max_batch: int, max_context: int, max_chunk: int) -> list:
    """The warm-up workload: ``(requests, run_kwargs)`` pairs for :meth:`Engine.run`.

    1. a decode ramp: ``max_batch`` short prompts queued at once, outputs spread evenly from a
       quarter of ``max_context`` to all of it, so the batch stays full while contexts grow,
       then shrinks to 1 (a full batch of long contexts is what static batching runs);
    2. a steady stream: ``max_batch`` requests with prompts of 16 tokens up to ``max_chunk``
       and outputs up to a quarter of ``max_context``, through half as many slots, so that
       prompts are admitted beside running decodes as slots free up (continuous batching's
       usual step);
    3. long prompts (``max_context``) prefilled in chunks of ``max_chunk`` tokens beside a
       decoding batch: chunks that start deep in a prompt, mixed with decode rows.
    """
    ramp_outs = np.linspace(max(max_context // 4, 2), max(max_context - 16, 2), max_batch)
    ramp = [Request(0.0, 16, int(o)) for o in ramp_outs]
    n = max(max_batch, 2)
    rng = np.random.default_rng(0)
    prompts = rng.permutation(np.geomspace(16, max(max_chunk, 16), n).astype(int))
    outs = rng.permutation(np.linspace(2, max(max_context // 4, 2), n).astype(int))
    steady = [Request(0.0, int(p), int(o)) for p, o in zip(prompts, outs)]
    long_len = max(max_context - 8, 2)
    budget = max(max_chunk, max_batch)
    mixed = [Request(0.0, 16, 48) for _ in range(max(max_batch // 2, 1))] + \
            [Request(0.0, long_len, 4) for _ in range(2)]
    cap = max_batch * (max_context + 64)
    return [(ramp, dict(max_batch=max_batch, kv_capacity_tokens=cap)),
            (steady, dict(max_batch=max(max_batch // 2, 1), kv_capacity_tokens=cap)),
            (mixed, dict(max_batch=max_batch, kv_capacity_tokens=cap, max_batched_tokens=budget))]


def calibrate(engine: Engine, *, max_batch: int, max_context: int, max_chunk: int, block_size: int = 16,
              progress=None, clock=time.perf_counter) -> Calibration:
    """Run :func:`warmup_runs` on ``engine`` and fit a step-time model to every step measured.

    ``max_batch``, ``max_context`` (tokens) and ``max_chunk`` (prefill tokens in one step)
    should cover the workload to be predicted. First, untimed: every matrix-product shape the
    workload's steps meet (:func:`~servelib.engine.model.warm_shapes`),
    and a short run, to absorb the other one-off costs (allocation, kernel selection). The fit weighs each step by the inverse of its time
    (:func:`servelib.sim.fit_step_time`). ``progress``, if given, receives a line of text per
    run. ``clock``: as in :meth:`Engine.run`. Raises ValueError for bad sizes.
    """
    runs = warmup_runs(_check.positive_int("max_batch", max_batch), _check.positive_int("max_context", max_context),
                       _check.positive_int("max_chunk", max_chunk))
    t0 = time.perf_counter()
    warm_shapes(engine.model, max_rows=max_chunk + max_batch, max_batch=max_batch, max_context=max_context)
    engine.run([Request(0.0, 16, 8)] * 4, max_batch=4, block_size=block_size)
    steps, secs = [], []
    for k, (reqs, kw) in enumerate(runs):
        run = engine.run(reqs, block_size=block_size, clock=clock, **kw)
        steps += run.steps
        secs += run.result.trace.step_s.tolist()
        if progress:
            progress(f"warm-up run {k + 1}/{len(runs)}: {len(run.steps)} steps in {run.wall_s:.1f} s")
    model = fit_step_time(steps, secs, source=f"fitted to {len(steps)} warm-up steps of {engine}")
    fitted = np.array([model.of_step(s) for s in steps])
    return Calibration(model, tuple(steps), np.array(secs), fitted, time.perf_counter() - t0)


def predict(requests, model: StepTimeModel, **run_kwargs):
    """The simulator's prediction of :meth:`Engine.run` for the same ``requests`` and settings.

    ``run_kwargs``: the keyword arguments given to :meth:`Engine.run` (``policy``,
    ``max_batch``, ``kv_capacity_tokens``, ``block_size``, ``admission``, ``preemption``,
    ``max_batched_tokens``, ``offline``; ``reserve_max`` and the engine-only ones are
    accepted); the same scheduler runs with ``model``'s step times instead of a clock.
    Returns a :class:`servelib.sim.SimResult`.
    """
    kw = dict(run_kwargs)
    offline = kw.pop("offline", False)
    for name in ("skip_idle", "record_logits", "progress", "clock"):
        kw.pop(name, None)
    reqs = list(requests)
    if offline:
        reqs = [dataclasses.replace(r, arrival_s=0.0) for r in reqs]
    block = kw.setdefault("block_size", 16)
    cap = kw.setdefault("kv_capacity_tokens", 65_536)
    kw["kv_capacity_tokens"] = cap // block * block
    if kw.pop("reserve_max", False):
        return _simulate_reserved(reqs, model, kw)
    return simulate(reqs, step_time_s=model, **kw)


def _simulate_reserved(reqs, model, kw):
    # simulate() has no paged max-length reservation; build the same scheduler the engine uses.
    from ..sim.blocks import KVPool
    from ..sim.core import result, run_modelled, token_budget
    from ..sim.scheduler import Scheduler
    policy = kw.get("policy", "continuous")
    pool = KVPool(kw["kv_capacity_tokens"], kw["block_size"], kw.get("admission", "final"), reserve=True)
    sched = Scheduler(reqs, pool, static=policy == "static", max_batch=kw["max_batch"], preemption=None,
                      budget_tokens=token_budget(kw.get("max_batched_tokens"), kw["max_batch"]), detail=True)
    run_modelled(sched, None, model.of_step)
    return result(sched, policy)


#: The figures :func:`compare` puts side by side (the simulator's goal: within 15% of the engine).
COMPARED = ("makespan_s", "mean_latency_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s")


def compare(measured, predicted, keys=COMPARED) -> list:
    """``(figure, measured, predicted, relative error)`` for each of ``keys`` (names in
    :meth:`servelib.sim.SimResult.summary`), the error being predicted / measured - 1."""
    m, p = measured.summary(), predicted.summary()
    return [(k, m[k], p[k], p[k] / m[k] - 1 if m[k] else float("nan")) for k in keys]


def capacity_rps(requests, model: StepTimeModel, **run_kwargs) -> float:
    """Requests per second the replica completes when saturated: the simulator's throughput
    for ``requests`` all queued at once, with ``model``'s step times (:func:`predict`)."""
    return predict(requests, model, **{**run_kwargs, "offline": True}).request_throughput_rps


@dataclass(frozen=True)
class Overhead:
    """An engine decode step against the bare decoder's forward pass at the same batch and context.

    ``bare_s``: :func:`servelib.measure.time_decode`'s median (one forward pass over a
    contiguous cache); ``engine_s``: the median decode step of an engine run (a whole
    iteration: scheduling, block tables, paged forward pass, sampling); ``ratio``: the median
    over the rounds of engine / bare, each round timing both back to back, so that a machine
    whose speed drifts affects both alike.
    """

    batch: int
    context_len: int
    bare_s: float
    engine_s: float
    ratio: float


def step_overhead(engine: Engine, batch: int, context_len: int, *, rounds: int = 5, steps: int = 16) -> Overhead:
    """Time the engine's decode step against the bare decoder's, ``rounds`` times back to back.

    Each round times the bare step (:func:`servelib.measure.time_decode`) and runs ``batch``
    requests whose decode steps sit around ``context_len`` tokens of context, keeping the
    median of their decode steps after the first two. Raises ValueError for bad sizes.
    """
    from ..measure import time_decode
    b = _check.positive_int("batch", batch)
    ctx = _check.positive_int("context_len", context_len)
    steps = max(_check.positive_int("steps", steps), 4)
    bare, eng = [], []
    reqs = [Request(0.0, max(ctx - steps // 2, 1), steps)] * b
    for _ in range(_check.positive_int("rounds", rounds)):
        bare.append(time_decode(engine.model, ctx, b, min_run_time=0.1).step_s)
        r = engine.run(reqs, max_batch=b, kv_capacity_tokens=b * (ctx + steps + 16)).result
        eng.append(float(np.median(r.trace.step_s[r.trace.tokens == b][2:])))
    ratios = [e / s for e, s in zip(eng, bare)]
    return Overhead(b, ctx, float(np.median(bare)), float(np.median(eng)), float(np.median(ratios)))
