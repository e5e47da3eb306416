"""Waiting in line: the queueing arithmetic of sizing a pool of serving instances for a latency target.

Two results, each exact for its model and stated with its assumption:

* **Prefill as an M/D/1 queue.** Requests arrive at random (a Poisson process of rate
  ``lambda``) and a prefill instance serves them one at a time, each in a fixed time ``s``
  (the roofline prefill time of one prompt). Its utilisation is ``rho = lambda * s``. The
  mean wait before service is the Pollaczek-Khinchine formula for deterministic service,
  ``rho * s / (2 (1 - rho))`` (the M/G/1 queue with zero service variance; Kleinrock,
  *Queueing Systems* vol. 1, 1975, ch. 5). A percentile of the wait uses two facts: the
  probability of waiting at all is exactly ``rho`` (same chapter), and Kingman's martingale
  bound ``P(W > t) <= exp(-theta t)`` (Kingman 1964), where ``theta`` is the positive root of
  ``lambda (exp(theta s) - 1) = theta``. Writing ``x = theta s``, the root depends on the
  utilisation alone: ``rho (e^x - 1) = x``.
* **Decode as an M/G/infinity occupancy.** Requests that arrive at random and each stay a
  fixed time (their output tokens times the step time) are, at any instant, a Poisson number
  with mean ``lambda * time`` (Little's law gives the mean; the M/G/infinity result the
  distribution, whatever the time's distribution). An instance that can batch ``B``
  sequences is full with the probability that this Poisson count exceeds ``B``.

Splitting Poisson arrivals at random over ``n`` instances gives each a Poisson stream of
``lambda / n``, so one instance's arithmetic sizes a pool. A dispatcher that sends each
request to the least-loaded instance does better than a random split, so sizes computed
here err on the safe side.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from . import _check


def _percentile(percentile):
    """``percentile`` (0-100, exclusive) as a probability q, or None for the mean."""
    if percentile is None:
        return None
    p = _check._real("percentile", percentile)
    if not 0 < p < 100:
        raise ValueError(f"percentile must lie in (0, 100) or be None (the mean), got {percentile!r}")
    return p / 100


def _utilization(arrival_rate_per_s, service_s):
    lam = _check.non_negative("arrival_rate_per_s", arrival_rate_per_s)
    s = _check.positive("service_s", service_s)
    rho = lam * s
    if rho >= 1:
        raise ValueError(f"arrival_rate_per_s x service_s must be < 1 (a queue that never empties), "
                         f"got {lam:g}/s x {s:g} s = {rho:g}")
    return rho, s


def md1_mean_wait_s(arrival_rate_per_s: float, service_s: float) -> float:
    """Mean time a request waits before service in an M/D/1 queue (s): ``rho s / (2 (1 - rho))``.

    Poisson arrivals of ``arrival_rate_per_s``, one server, every service ``service_s``
    seconds, ``rho = arrival_rate_per_s * service_s``. Pollaczek-Khinchine with zero service
    variance: half the M/M/1 wait at the same utilisation. Example: ``rho = 0.5`` waits half
    a service time on average. Raises ValueError unless ``rho < 1``.
    """
    rho, s = _utilization(arrival_rate_per_s, service_s)
    return rho * s / (2 * (1 - rho))


def lindley_waits(interarrival_s, service_s: float) -> np.ndarray:
    """Waits before service (s) of successive requests at one server with a fixed service time,
    by Lindley's recursion ``W[k+1] = max(0, W[k] + service_s - A[k])``, the first request
    finding the server idle. ``interarrival_s[k]``: the gap between request k and k + 1.

    A simulation to hold the closed forms of this module against: with exponential gaps it
    is an M/D/1 queue. Example: gaps 0.5, 0.5, 2 with a 1 s service give waits 0, 0.5, 1, 0.
    Raises ValueError for a negative gap or a service time that is not > 0.
    """
    s = _check.positive("service_s", service_s)
    gaps = np.asarray(interarrival_s, dtype=float)
    if gaps.ndim != 1 or not np.all(np.isfinite(gaps)) or np.any(gaps < 0):
        raise ValueError("interarrival_s must be a 1-D sequence of finite gaps >= 0 (seconds)")
    w = np.empty(gaps.size + 1)
    x = w[0] = 0.0
    for k, a in enumerate(gaps.tolist()):
        x = max(0.0, x + s - a)
        w[k + 1] = x
    return w


def _kingman_x(rho):
    """The positive root x of ``rho (e^x - 1) = x`` for 0 < rho < 1 (Newton from above)."""
    x = max(2.0, 2 * math.log(1 / rho))          # above the root: rho (e^x - 1) > x there
    for _ in range(100):
        step = (rho * math.expm1(x) - x) / (rho * math.exp(x) - 1)
        x -= step
        if abs(step) < 1e-13 * x:
            break
    return x


def md1_wait_percentile_s(arrival_rate_per_s: float, service_s: float, percentile: float) -> float:
    """An upper bound on the ``percentile``-th percentile (0-100) of the M/D/1 wait (s).

    A request waits at all with probability exactly ``rho``, so the percentile is 0 when
    ``rho <= 1 - q`` (q = percentile / 100). Otherwise Kingman's bound
    ``P(W > t) <= exp(-x t / s)``, with x the root of ``rho (e^x - 1) = x``, gives
    ``t_q <= s ln(1 / (1 - q)) / x``. The bound is conservative: the true tail is a constant
    below one times the same exponential. Raises ValueError unless ``rho < 1`` and
    ``0 < percentile < 100``.
    """
    rho, s = _utilization(arrival_rate_per_s, service_s)
    q = _percentile(percentile)
    if q is None:
        raise ValueError("percentile must be a number in (0, 100); use md1_mean_wait_s for the mean")
    if rho <= (1 - q) * (1 + 1e-12):      # slack for 1 - 0.9 = 0.09999999999999998
        return 0.0
    return s * math.log(1 / (1 - q)) / _kingman_x(rho)


def md1_wait_s(arrival_rate_per_s: float, service_s: float, percentile: float | None = None) -> float:
    """The M/D/1 wait (s): its mean when ``percentile`` is None (:func:`md1_mean_wait_s`), else
    the bound on that percentile (:func:`md1_wait_percentile_s`)."""
    if percentile is None:
        return md1_mean_wait_s(arrival_rate_per_s, service_s)
    return md1_wait_percentile_s(arrival_rate_per_s, service_s, percentile)


def md1_max_utilization(service_s: float, wait_budget_s: float, percentile: float | None = None) -> float:
    """The highest utilisation rho at which the M/D/1 wait stays within ``wait_budget_s``.

    For the mean: ``rho s / (2 (1 - rho)) <= b`` gives ``rho <= 2b / (2b + s)``. For a
    percentile q (0-100, as a fraction q): the wait percentile is 0 up to ``rho = 1 - q``
    and Kingman's bound stays within ``b`` while the root x of ``rho (e^x - 1) = x`` is at
    least ``x_b = s ln(1 / (1 - q)) / b``; x falls as rho rises, so
    ``rho <= max(1 - q, x_b / (e^x_b - 1))``. A budget of 0 allows only ``1 - q`` (or
    nothing, for the mean). Raises ValueError for a service time that is not > 0 or a
    negative budget.
    """
    s = _check.positive("service_s", service_s)
    b = _check.non_negative("wait_budget_s", wait_budget_s)
    q = _percentile(percentile)
    if q is None:
        return 2 * b / (2 * b + s)
    if b == 0:
        return 1 - q
    xb = s * math.log(1 / (1 - q)) / b
    # x / (e^x - 1) underflows to 0 long before e^x overflows a float.
    return max(1 - q, xb / math.expm1(xb) if xb < 700 else 0.0)


def poisson_percentile(mean: float, percentile: float) -> int:
    """The ``percentile``-th percentile (0-100) of a Poisson count of mean ``mean``: the
    smallest k with ``P(N <= k) >= percentile / 100``. Raises ValueError for a negative mean
    or a percentile outside (0, 100)."""
    m = _check.non_negative("mean", mean)
    q = _percentile(percentile)
    if q is None:
        raise ValueError("percentile must be a number in (0, 100)")
    if m == 0:
        return 0
    k = np.arange(0, int(m + 20 * math.sqrt(m) + 50))
    log_pmf = k * math.log(m) - m - np.array([math.lgamma(i + 1) for i in k])
    return int(np.searchsorted(np.cumsum(np.exp(log_pmf)), q * (1 - 1e-12)))


@functools.lru_cache(maxsize=4096)
def _poisson_max_mean(batch, q):
    """Largest Poisson mean whose q-quantile is <= batch (bisection; cached, pools reuse it)."""
    k = np.arange(batch + 1)
    log_fact = np.cumsum(np.log(np.maximum(k, 1)))

    def cdf(m):
        return float(np.exp(k * math.log(m) - m - log_fact).sum())

    lo, hi = 0.0, float(batch) + 1.0
    while cdf(hi) >= q:                 # the q-quantile of a mean above batch can still be <= batch
        hi *= 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) >= q else (lo, mid)
    return lo


def max_mean_occupancy(batch: int, percentile: float | None = None) -> float:
    """The largest mean number of sequences an instance can carry when it batches at most
    ``batch`` and arrivals are Poisson: ``batch`` itself for the mean, or the largest Poisson
    mean whose ``percentile``-th percentile is at most ``batch`` (so the instance is full
    at most ``100 - percentile`` percent of the time). Example: batch 64 at p90 carries a
    mean of about 54. Raises ValueError for a batch that is not an integer >= 1."""
    b = _check.positive_int("batch", batch)
    q = _percentile(percentile)
    return float(b) if q is None else _poisson_max_mean(b, q)
