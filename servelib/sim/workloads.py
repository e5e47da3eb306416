"""Seeded workloads for :func:`servelib.sim.simulate`.

Every generator takes a ``seed`` (numpy's ``default_rng``) so the same call always gives
the same requests. Lengths are whole tokens, at least 1.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _check
from .core import Request

# The longest length a generator returns: a bound far above any context window that keeps
# lengths exact in int64 and float64.
_MAX_LEN = 2**53


def output_lengths(n: int, mean: float, cv: float = 1.0, *, seed: int = 0, max_len: int | None = None):
    """``n`` output lengths (tokens, ints >= 1) with mean ``mean`` and spread ``cv``.

    Drawn from a gamma distribution with coefficient of variation ``cv`` (standard deviation
    / mean): ``cv=0`` gives every request ``mean`` tokens, ``cv=1`` the exponential
    distribution, larger values heavier tails. Lengths are rounded up and clipped to
    ``max_len`` if given. Returns a numpy int array of shape ``(n,)``.
    """
    n = _check.positive_int("n", n)
    mean = _check.positive("mean", mean)
    cv = _check.non_negative("cv", cv)
    seed = _check.non_negative_int("seed", seed)
    if mean > _MAX_LEN:
        raise ValueError(f"mean must be <= {_MAX_LEN} tokens, got {mean!r}")
    if cv == 0:
        x = np.full(n, mean)
    else:
        shape = (1 / cv) ** 2          # underflows to 0 for an absurd cv, never overflows
        if not shape > 0:
            raise ValueError(f"cv is too large to draw from: 1 / cv**2 underflows to 0 (got {cv!r})")
        x = np.random.default_rng(seed).gamma(shape, mean / shape, n)
    # Heavy tails can draw more than an int64 holds: clip before converting, never wrap around.
    x = np.minimum(x, _MAX_LEN)
    x = np.maximum(np.ceil(x), 1).astype(np.int64)
    return np.minimum(x, _check.positive_int("max_len", max_len)) if max_len is not None else x


def poisson_arrivals(n: int, rate_per_s: float, *, seed: int = 0, start_s: float = 0.0):
    """``n`` arrival times (s, sorted) of a Poisson process of ``rate_per_s`` requests/s."""
    rng = np.random.default_rng(_check.non_negative_int("seed", seed))
    mean_gap = 1 / _check.positive("rate_per_s", rate_per_s)
    if mean_gap == math.inf:      # a subnormal rate: its mean gap overflows a float
        raise ValueError(f"rate_per_s is too small to draw from: 1 / rate_per_s overflows (got {rate_per_s!r})")
    gaps = rng.exponential(mean_gap, _check.positive_int("n", n))
    return _check.non_negative("start_s", start_s) + np.cumsum(gaps) - gaps[0]


def bursty_arrivals(n: int, rate_per_s: float, burst_size: int, *, seed: int = 0):
    """``n`` arrival times (s): bursts of ``burst_size`` simultaneous requests, the bursts a
    Poisson process with the same mean request rate ``rate_per_s``."""
    b = _check.positive_int("burst_size", burst_size)
    n = _check.positive_int("n", n)
    starts = poisson_arrivals(-(-n // b), _check.positive("rate_per_s", rate_per_s) / b, seed=seed)
    return np.repeat(starts, b)[:n]


def make_requests(arrival_s, prompt_len, output_len, max_output_len=None, tier="interactive",
                  prefix_id=None, prefix_len=0) -> list[Request]:
    """Zip arrays (or scalars, broadcast) into a list of :class:`Request`.

    Each value is checked by :class:`Request` as given (``8192.5`` tokens is an error, not
    8192). Raises ValueError naming an argument that is not a scalar or a flat sequence, or
    the arguments whose shapes do not broadcast together.
    """
    names = ("arrival_s", "prompt_len", "output_len", "max_output_len")
    arrays = [np.asarray(v) for v in (arrival_s, prompt_len, output_len,
                                      output_len if max_output_len is None else max_output_len)]
    for name, a in zip(names, arrays):
        if a.ndim > 1:     # one value per request: a nested list has no meaning
            raise ValueError(f"{name} must be a scalar or a flat sequence (one value per request), "
                             f"got an array of shape {a.shape}")
    try:
        cols = np.broadcast_arrays(*arrays)
    except ValueError:
        shapes = ", ".join(f"{n} {a.shape}" for n, a in zip(names, arrays))
        raise ValueError(f"arrival_s, prompt_len, output_len and max_output_len must have the same "
                         f"length (or be scalars), got {shapes}") from None
    # .item() gives Python numbers, so Request rejects a fractional or NaN length itself.
    return [Request(a.item(), p.item(), o.item(), m.item(), tier, prefix_id, prefix_len)
            for a, p, o, m in zip(*(np.atleast_1d(c) for c in cols))]


def uneven_outputs(seed: int = 0) -> dict:
    """The syllabus's uneven-output workload: keyword arguments for :func:`simulate`.

    An offline backlog: 184 requests all queued at t = 0, 128-token prompts, output lengths
    exponential with mean 256 tokens (``output_lengths(184, 256, cv=1.0, seed=seed)``, the
    client cap ``max_output_len`` = 4,096), served with ``max_batch=40`` at a constant
    25 ms per step and no KV limit. Add ``policy="static"`` or ``policy="continuous"``.

    With ``seed=0`` continuous batching finishes the backlog 2.77x sooner than static
    batching and its mean latency is 4.97x lower (the syllabus's 2.8x and 5x); over seeds
    0-9 the ratios average 2.83x and 5.15x.
    """
    outs = output_lengths(184, 256, 1.0, seed=_check.non_negative_int("seed", seed), max_len=4096)
    return dict(requests=make_requests(0.0, 128, outs, 4096), max_batch=40, step_time_s=0.025)
