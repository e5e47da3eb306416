"""Workloads sized for the engine: the book's scheduling workloads, scaled so a CPU runs them in seconds.

Each returns ``(requests, run_kwargs)``: a list of :class:`servelib.sim.Request` and the
keyword arguments for :meth:`servelib.engine.Engine.run` (and for
:func:`servelib.engine.predict`). Every draw is seeded (:mod:`servelib.sim.workloads`).
"""
from __future__ import annotations

import numpy as np

from .. import _check
from ..sim import workloads as w

#: Names accepted by :func:`make_workload`.
WORKLOADS = ("uneven", "poisson", "bursty")


def uneven(seed: int = 0, *, n: int = 184, mean_output: int = 64, prompt_len: int = 64,
           max_batch: int = 40):
    """The uneven-outputs backlog of the scheduling chapter, scaled down: ``n`` requests queued at
    t = 0, ``prompt_len``-token prompts, exponential outputs with mean ``mean_output`` tokens
    (capped at 8 x the mean, which is also every client's ``max_output_len``), ``max_batch``
    slots, and a KV pool that holds every slot's final length (so memory never limits)."""
    cap = 8 * _check.positive_int("mean_output", mean_output)
    outs = w.output_lengths(_check.positive_int("n", n), mean_output, 1.0, seed=_check.non_negative_int("seed", seed),
                            max_len=cap)
    reqs = w.make_requests(0.0, _check.positive_int("prompt_len", prompt_len), outs, cap)
    return reqs, dict(max_batch=max_batch, kv_capacity_tokens=max_batch * (prompt_len + cap), offline=True)


def chat(rate_per_s: float, seed: int = 0, *, n: int = 200, mean_output: int = 48, burst_size: int = 1,
         max_batch: int = 32):
    """Chat traffic for an open-loop replay: ``n`` requests arriving at ``rate_per_s`` (Poisson,
    or in bursts of ``burst_size``), prompts of 32 to 255 tokens, exponential outputs with mean
    ``mean_output`` (at most 4 x the mean, the clients' ``max_output_len``), ``max_batch`` slots
    and a pool that holds every slot's final length."""
    n = _check.positive_int("n", n)
    seed = _check.non_negative_int("seed", seed)
    b = _check.positive_int("burst_size", burst_size)
    arr = w.poisson_arrivals(n, rate_per_s, seed=seed) if b == 1 else w.bursty_arrivals(n, rate_per_s, b, seed=seed)
    cap = 4 * _check.positive_int("mean_output", mean_output)
    prompts = np.random.default_rng([seed, 1]).integers(32, 256, n)
    reqs = w.make_requests(arr, prompts, w.output_lengths(n, mean_output, 1.0, seed=seed + 1, max_len=cap), cap)
    return reqs, dict(max_batch=max_batch, kv_capacity_tokens=max_batch * (256 + cap))


def make_workload(name: str, *, rate_per_s: float | None = None, seed: int = 0, n: int | None = None):
    """One of :data:`WORKLOADS`: ``"uneven"`` (:func:`uneven`), ``"poisson"`` or ``"bursty"``
    (:func:`chat` at ``rate_per_s``, bursts of 8 for ``"bursty"``), with ``n`` requests if
    given. Raises ValueError for an unknown name or a missing rate."""
    _check.choice("workload", name, WORKLOADS)
    size = {} if n is None else dict(n=n)
    if name == "uneven":
        return uneven(seed, **size)
    if rate_per_s is None:
        raise ValueError(f"workload {name!r} needs a rate (requests/s)")
    return chat(rate_per_s, seed, burst_size=8 if name == "bursty" else 1, **size)
