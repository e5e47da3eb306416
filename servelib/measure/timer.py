"""Timing done right: warm-up, synchronisation, device events, the median of repeats."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch
from torch.utils import benchmark

from .. import _check
from .device import DeviceInfo, pick_device


@dataclass(frozen=True)
class Timing:
    """The time of one call of a function, in seconds.

    ``median_s``: the median over ``n`` measurements (robust to a machine busy with other
    work, which inflates a few of them); ``iqr_s``: their interquartile range.
    """

    median_s: float
    iqr_s: float
    n: int


def synchronize(device: DeviceInfo) -> None:
    """Wait until the device has finished queued work (GPU calls return before they run)."""
    if device.kind == "cuda":
        torch.cuda.synchronize()
    elif device.kind == "mps":
        torch.mps.synchronize()


def time_call(fn, device: DeviceInfo | None = None, *, min_run_time: float = 0.2,
              warmup: int = 1) -> Timing:
    """Time ``fn()`` (no arguments) on ``device``: ``warmup`` untimed calls, then repeats.

    On CUDA each call is bracketed by CUDA events (timed on the GPU itself, not by the
    host clock) for at least ``min_run_time`` seconds, and the median is taken. Elsewhere
    ``torch.utils.benchmark.Timer.blocked_autorange`` runs blocks of calls for at least
    ``min_run_time`` seconds with all of torch's threads (its default is one thread) and
    synchronises MPS. Warm-up absorbs one-off costs (allocation, kernel selection, page
    faults) that a steady-state figure should not include. ``fn`` must be repeatable: to
    keep caches from flattering a memory-bound figure, let it cycle through buffers larger
    than the last-level cache (see :func:`servelib.measure.copy_bandwidth_Bps`).
    Raises ValueError for a non-positive ``min_run_time`` or negative ``warmup``.
    """
    _check.positive("min_run_time", min_run_time)
    dev = device or pick_device()
    for _ in range(_check.non_negative_int("warmup", warmup)):
        fn()
    synchronize(dev)
    if dev.kind == "cuda":
        times = []
        start_wall = time.perf_counter()
        while time.perf_counter() - start_wall < min_run_time or len(times) < 3:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        q = statistics.quantiles(times, n=4)
        return Timing(statistics.median(times), q[2] - q[0], len(times))
    stmt = "fn(); sync()"
    timer = benchmark.Timer(stmt, globals={"fn": fn, "sync": lambda: synchronize(dev)},
                            num_threads=torch.get_num_threads())
    m = timer.blocked_autorange(min_run_time=min_run_time)
    return Timing(m.median, m.iqr, len(m.times))


def time_interleaved(fns, device: DeviceInfo | None = None, *, repeats: int = 3,
                     min_run_time: float = 0.1) -> list[Timing]:
    """Time several functions to compare them, in turn, ``repeats`` times over.

    Each round times every function once with :func:`time_call` (its warm-up included on the
    first round); a function's figure is the median over rounds (``iqr_s`` their
    interquartile range, ``n`` the number of rounds). On a machine shared with other work a
    burst of load then falls on every function alike instead of on whichever happened to run
    during it, so their ratio stays fair. Raises ValueError for no functions or
    ``repeats`` < 1.
    """
    fns = list(fns)
    if not fns:
        raise ValueError("fns must hold at least one function to time")
    r = _check.positive_int("repeats", repeats)
    dev = device or pick_device()
    samples = [[] for _ in fns]
    for i in range(r):
        for s, fn in zip(samples, fns):
            s.append(time_call(fn, dev, min_run_time=min_run_time, warmup=1 if i == 0 else 0).median_s)
    out = []
    for s in samples:
        q = statistics.quantiles(s, n=4) if len(s) > 1 else (s[0], s[0], s[0])
        out.append(Timing(statistics.median(s), q[2] - q[0], len(s)))
    return out
