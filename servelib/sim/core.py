"""The simulator of one serving replica: requests, results, and a modelled clock.

Time advances one model step at a time. In a step every running sequence decodes one
token and newly admitted sequences prefill (their whole prompt, or a chunk of it when
``max_batched_tokens`` is set); the prefill's last chunk yields the request's first token.
Who runs in each step is decided by :class:`servelib.sim.scheduler.Scheduler`, the same code
that drives the real engine (:mod:`servelib.engine`); here a step's duration is a constant
or a function of its shape (see :func:`simulate`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Integral

import numpy as np

from .. import _check
from .blocks import KVPool
from .scheduler import STATUS_NAMES, Scheduler

TIERS = ("interactive", "batch")
POLICIES = ("continuous", "static")
ADMISSIONS = ("final", "prompt")
PREEMPTIONS = (None, "recompute", "swap")

#: Most tokens a request's prompt, or its output cap, may hold. Far beyond any model's
#: context window, yet a bound that keeps a run finite: the simulator spends about 180 bytes
#: and 3 microseconds per decode step, so one 10**7-token output costs ~2 GB and ~30 s.
MAX_TOKENS = 10**7


@dataclass(frozen=True)
class Request:
    """One request as the scheduler sees it.

    ``arrival_s``: arrival time in seconds (>= 0). ``prompt_len``: prompt tokens (>= 1).
    ``output_len``: tokens the model will actually generate (>= 1; unknown to the scheduler).
    ``max_output_len``: the cap the client asked for, which the scheduler does know
    (default ``output_len``; must be >= ``output_len``). Lengths are at most
    :data:`MAX_TOKENS` (10**7). ``tier``: ``"interactive"`` or ``"batch"`` (reported
    separately; the scheduler treats both first come, first served). ``prefix_id`` /
    ``prefix_len``: requests with the same ``prefix_id`` (a str or an int) share their first
    ``prefix_len`` prompt tokens (a system prompt); a paged cache stores the full blocks of
    that prefix once, reference-counted. Raises ValueError/TypeError naming the field.
    """

    arrival_s: float
    prompt_len: int
    output_len: int
    max_output_len: int | None = None
    tier: str = "interactive"
    prefix_id: str | int | None = None
    prefix_len: int = 0

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "arrival_s", _check.non_negative("arrival_s", self.arrival_s))
        set_(self, "prompt_len", _tokens("prompt_len", self.prompt_len))
        set_(self, "output_len", _tokens("output_len", self.output_len))
        cap = self.output_len if self.max_output_len is None else _tokens("max_output_len", self.max_output_len)
        if cap < self.output_len:
            raise ValueError(f"max_output_len ({cap}) must be >= output_len ({self.output_len}): "
                             "the model stops at the cap")
        set_(self, "max_output_len", cap)
        _check.choice("tier", self.tier, TIERS)
        # The scheduler and the engine's cache look prefixes up by id: it must be hashable,
        # and equal ids must mean the same prefix (so no floats, where 1 == 1.0 == True).
        if self.prefix_id is not None and (isinstance(self.prefix_id, bool)
                                           or not isinstance(self.prefix_id, (str, Integral))):
            raise TypeError(f"prefix_id must be a str, an int or None, got {type(self.prefix_id).__name__} "
                            f"{self.prefix_id!r}"[:300])
        set_(self, "prefix_len", _check.non_negative_int("prefix_len", self.prefix_len))
        if self.prefix_len > self.prompt_len:
            raise ValueError(f"prefix_len ({self.prefix_len}) must be <= prompt_len ({self.prompt_len})")
        if self.prefix_len and self.prefix_id is None:
            raise ValueError("prefix_len > 0 needs a prefix_id naming the shared prefix")

    @property
    def final_len(self) -> int:
        """The most KV tokens this request can ever hold: ``prompt_len + max_output_len``."""
        return self.prompt_len + self.max_output_len


def _tokens(name, value) -> int:
    v = _check.positive_int(name, value)
    if v > MAX_TOKENS:
        raise ValueError(f"{name} must be an integer in [1, {MAX_TOKENS:,}] tokens, got {value!r}")
    return v


@dataclass(frozen=True)
class Trace:
    """Per-step record of a run (numpy arrays, one entry per step, in step order).

    ``end_s``: time at the end of the step (s). ``step_s``: its duration (s). ``batch``:
    sequences in the batch (static batching counts finished members it still carries).
    ``decode``: sequences that decoded a token. ``tokens``: tokens processed (decode tokens
    plus prefill tokens). ``kv_used_tokens``: tokens of KV actually stored (a shared prefix
    once). ``kv_allocated_tokens``: tokens of memory held (reservations, or whole blocks).
    ``waiting``: requests left in the queue while the step runs (after its admissions).
    """

    end_s: np.ndarray
    step_s: np.ndarray
    batch: np.ndarray
    decode: np.ndarray
    tokens: np.ndarray
    kv_used_tokens: np.ndarray
    kv_allocated_tokens: np.ndarray
    waiting: np.ndarray


@dataclass(frozen=True)
class SimResult:
    """What a run of :func:`simulate` produced. Times in seconds from t = 0.

    Per request (numpy arrays in the order of the input list; NaN where it does not apply):
    ``ttft_s`` (arrival to first token), ``tpot_s`` (mean time between its output tokens;
    NaN for one-token outputs), ``latency_s`` (arrival to the response being returned: for
    static batching that is when the whole batch ends), ``status`` (``"completed"``,
    ``"rejected"``, ``"oom_killed"``, ``"starved"``), ``tier``, ``output_len``.
    ``rejections``: ``(request index, reason)`` pairs.

    Per run: ``makespan_s`` (first arrival to the end of the last step), ``n_steps``,
    ``n_oom_events`` (times an overflow killed the in-flight batch), ``n_oom_killed``,
    ``oom_tokens_lost`` (generated tokens thrown away), ``n_oom_killed_90pct_done`` (killed
    requests that had generated at least 90% of their output), ``n_preempted`` (preemption
    events), ``recomputed_tokens`` (KV tokens recomputed after recompute preemptions),
    ``swapped_tokens`` (KV tokens copied out to host and back), ``preempted_steps`` (steps that
    preempted requests spent out of the batch), ``kv_capacity_tokens``, ``kv_peak_tokens``
    (peak KV memory held, tokens), ``kv_peak_used_tokens``, ``trace`` (:class:`Trace`).
    """

    policy: str
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    latency_s: np.ndarray
    status: np.ndarray
    tier: np.ndarray
    output_len: np.ndarray
    rejections: tuple
    makespan_s: float
    n_steps: int
    n_oom_events: int
    n_oom_killed: int
    oom_tokens_lost: int
    n_oom_killed_90pct_done: int
    n_preempted: int
    recomputed_tokens: int
    swapped_tokens: int
    preempted_steps: int
    kv_capacity_tokens: float
    kv_peak_tokens: int
    kv_peak_used_tokens: int
    trace: Trace = field(repr=False)

    def _mask(self, tier):
        done = self.status == "completed"
        return done if tier is None else done & (self.tier == _check.choice("tier", tier, TIERS))

    @property
    def n_requests(self) -> int:
        """Requests in the run, whatever became of them."""
        return len(self.status)

    @property
    def n_completed(self) -> int:
        """Requests that completed."""
        return int(np.sum(self.status == "completed"))

    @property
    def n_rejected(self) -> int:
        """Requests rejected on arrival because they could never fit."""
        return len(self.rejections)

    @property
    def n_starved(self) -> int:
        """Requests left queued forever behind one that can never fit (see ``reject_oversized``)."""
        return int(np.sum(self.status == "starved"))

    @property
    def mean_latency_s(self) -> float:
        """Mean end-to-end latency of completed requests (s); NaN if none completed."""
        lat = self.latency_s[self._mask(None)]
        return float(lat.mean()) if lat.size else math.nan

    @property
    def completed_output_tokens(self) -> int:
        """Output tokens of the requests that completed."""
        return int(self.output_len[self._mask(None)].sum())

    @property
    def throughput_tokens_per_s(self) -> float:
        """Output tokens of completed requests per second of makespan."""
        return self.completed_output_tokens / self.makespan_s if self.makespan_s > 0 else math.nan

    @property
    def kv_waste_fraction(self) -> float:
        """Share of the KV memory held (time-weighted over steps) that stored no token."""
        tr = self.trace
        held = float(np.dot(tr.kv_allocated_tokens, tr.step_s))
        return 1 - float(np.dot(tr.kv_used_tokens, tr.step_s)) / held if held > 0 else 0.0

    def itl_percentile_s(self, q: float) -> float:
        """The ``q``-th percentile (0-100) of inter-token latency over every decode token of the
        run (s): each token produced by a decode step waited that step's duration."""
        if not 0 <= _check.non_negative("q", q) <= 100:
            raise ValueError(f"q must lie in [0, 100], got {q!r}")
        gaps = np.repeat(self.trace.step_s, self.trace.decode)
        return float(np.percentile(gaps, q)) if gaps.size else math.nan

    def goodput_rps(self, ttft_slo_s: float, tpot_slo_s: float) -> float:
        """Requests per second of makespan that completed within both service-level objectives:
        TTFT <= ``ttft_slo_s`` and TPOT <= ``tpot_slo_s`` (a one-token answer has no TPOT and
        meets that one). The definition of vLLM's ``benchmark_serving`` goodput. Raises
        ValueError for a non-positive SLO."""
        ttft_slo, tpot_slo = _check.positive("ttft_slo_s", ttft_slo_s), _check.positive("tpot_slo_s", tpot_slo_s)
        ok = self._mask(None) & (self.ttft_s <= ttft_slo) & ~(self.tpot_s > tpot_slo)
        return int(ok.sum()) / self.makespan_s if self.makespan_s > 0 else math.nan

    @property
    def request_throughput_rps(self) -> float:
        """Completed requests per second of makespan."""
        return self.n_completed / self.makespan_s if self.makespan_s > 0 else math.nan

    def mean_in_system(self) -> float:
        """Time-averaged number of requests in the replica (queued or holding a slot), from the
        per-step trace: each step counts the requests present when it starts for its duration;
        idle time counts zero. With :attr:`request_throughput_rps` (lambda) and the mean
        latency (W), Little's law says this equals lambda x W."""
        tr = self.trace
        return float(np.dot(tr.waiting + tr.batch, tr.step_s)) / self.makespan_s if self.makespan_s > 0 else math.nan

    def summary(self, ttft_slo_s: float | None = None, tpot_slo_s: float | None = None) -> dict:
        """The run's headline figures as a plain dict (seconds, tokens/s): makespan, counts,
        mean latency, p50/p90/p99 of TTFT, TPOT, ITL and latency, throughput, and goodput when
        both SLOs are given."""
        out = dict(makespan_s=self.makespan_s, n_requests=self.n_requests, n_completed=self.n_completed,
                   n_rejected=self.n_rejected, n_oom_killed=self.n_oom_killed, n_preempted=self.n_preempted,
                   n_steps=self.n_steps, mean_latency_s=self.mean_latency_s)
        for q in (50, 90, 99):
            out[f"ttft_p{q}_s"] = self.percentile("ttft_s", q)
            out[f"tpot_p{q}_s"] = self.percentile("tpot_s", q)
            out[f"itl_p{q}_s"] = self.itl_percentile_s(q)
            out[f"latency_p{q}_s"] = self.percentile("latency_s", q)
        out.update(throughput_tokens_per_s=self.throughput_tokens_per_s,
                   request_throughput_rps=self.request_throughput_rps,
                   kv_peak_tokens=self.kv_peak_tokens)
        if ttft_slo_s is not None and tpot_slo_s is not None:
            out.update(ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s,
                       goodput_rps=self.goodput_rps(ttft_slo_s, tpot_slo_s))
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}

    def percentile(self, metric: str, q: float, tier: str | None = None) -> float:
        """The ``q``-th percentile (0-100) of ``"ttft_s"``, ``"tpot_s"`` or ``"latency_s"`` over
        completed requests (of one tier if given); NaN if there are none."""
        _check.choice("metric", metric, ("ttft_s", "tpot_s", "latency_s"))
        if not 0 <= _check.non_negative("q", q) <= 100:
            raise ValueError(f"q must lie in [0, 100], got {q!r}")
        v = getattr(self, metric)[self._mask(tier)]
        v = v[~np.isnan(v)]
        return float(np.percentile(v, q)) if v.size else math.nan


def _step_time_fn(step_time_s):
    if hasattr(step_time_s, "of_step"):
        return None, step_time_s.of_step
    if callable(step_time_s):
        return None, lambda step: step_time_s(step.batch, step.tokens, step.kv_tokens)
    return _check.positive("step_time_s", step_time_s), None


def simulate(requests, *, policy: str = "continuous", max_batch: int, kv_capacity_tokens=None,
             admission: str = "final", block_size: int | None = None, preemption: str | None = None,
             max_batched_tokens: int | None = None, step_time_s, retire_before_admit: bool = True,
             reject_oversized: bool = True, swap_s_per_token: float | None = None) -> SimResult:
    """Run ``requests`` (a sequence of :class:`Request`) through one replica; return a :class:`SimResult`.

    ``policy``: ``"continuous"`` retires finished sequences and admits waiting ones at every
    step; ``"static"`` forms a batch when the replica is empty and runs it until its longest
    member finishes (finished members keep their slot and memory, and every member's response
    is returned when the batch ends). ``max_batch``: most sequences in a batch (>= 1).

    ``kv_capacity_tokens``: the KV budget in tokens (None: unlimited). ``admission``:
    ``"final"`` admits a request only if ``prompt_len + max_output_len`` fits beside what
    running requests have reserved, so memory never overflows; ``"prompt"`` admits on the
    prompt (plus the first token the prefill produces) and lets sequences grow: when growth
    overflows the budget, the whole in-flight batch is killed (out of memory), unless
    ``preemption`` is ``"recompute"`` (drop the most recently admitted sequence's KV and
    re-prefill it later; the only mode of vLLM's V1 engine) or ``"swap"`` (copy it to host
    memory and back; each token copied costs ``swap_s_per_token`` seconds of the step).
    Preempted requests rejoin the head of the queue. ``block_size``: tokens per block of a
    paged cache allocated on demand (None: contiguous, where final admission reserves the
    whole final length up front).

    ``swap_s_per_token``: seconds to copy one token's KV between device and host. None
    (default) takes the step-time model's own figure, which :func:`roofline_step_time`
    computes from the model's KV bytes per token over the GPU's host link
    (:func:`servelib.interconnect.get_host_link`); a constant step time has none, so swap
    preemption then needs an explicit value (0 for free copies).

    A request whose final length can never fit (more than the whole budget, in blocks when
    paged) is rejected on arrival with a reason; with ``reject_oversized=False`` it is queued
    instead, and, first come first served, it and everyone behind it wait forever
    (``"starved"``). ``retire_before_admit=False`` retires finished sequences only after the
    next admission (a scheduler bug the chapter shows). ``max_batched_tokens``: chunked
    prefill, at most this many tokens per step, decode tokens first, prompts chunked into
    the rest (>= ``max_batch``; continuous only).

    ``step_time_s``: seconds per step (> 0): a constant; a callable ``f(batch, tokens, kv_tokens)``
    of the sequences in the step, the tokens it processes (one per decoding sequence, plus
    prefill tokens, plus the padding rows of a static batch's finished members) and the KV
    tokens stored when it starts (:func:`servelib.sim.roofline_step_time` builds one from
    the roofline model); or an object with a method ``of_step(step)`` that takes the whole
    planned :class:`~servelib.sim.scheduler.Step` (:class:`servelib.sim.StepTimeModel`, fitted
    to a real engine, is one).

    Raises ValueError/TypeError naming the argument for bad input, and ValueError for
    combinations that have no meaning (preemption with final admission, which never runs out
    of memory; preemption or chunked prefill with static batching), and when the clock cannot
    count a step in float64 (an ``arrival_s`` some 10**10 steps from 0).
    """
    reqs = check_requests(requests)
    _check.choice("policy", policy, POLICIES)
    max_batch = _check.positive_int("max_batch", max_batch)
    _check.choice("admission", admission, ADMISSIONS)
    if preemption is not None:
        _check.choice("preemption", preemption, PREEMPTIONS[1:])
    static = policy == "static"
    if preemption is not None and admission == "final":
        raise ValueError("preemption needs admission='prompt': final admission never overflows memory")
    if static and (preemption is not None or max_batched_tokens is not None):
        raise ValueError("preemption and max_batched_tokens need policy='continuous'")
    budget_tokens = token_budget(max_batched_tokens, max_batch)
    dt_const, dt_fn = _step_time_fn(step_time_s)
    if swap_s_per_token is None:
        swap_s_per_token = getattr(step_time_s, "swap_s_per_token", None)
        if swap_s_per_token is None:
            if preemption == "swap":
                raise ValueError(
                    "preemption='swap' needs swap_s_per_token (seconds to copy one token's KV to host "
                    "memory and back; 0 for free copies), or a step_time_s from roofline_step_time, "
                    "which charges the model's KV bytes over the GPU's host link")
            swap_s_per_token = 0.0
    swap_cost = _check.non_negative("swap_s_per_token", swap_s_per_token)
    if not isinstance(retire_before_admit, bool) or not isinstance(reject_oversized, bool):
        raise TypeError("retire_before_admit and reject_oversized must be True or False")
    pool = KVPool(kv_capacity_tokens, block_size, admission)
    sched = Scheduler(reqs, pool, static=static, max_batch=max_batch, preemption=preemption,
                      budget_tokens=budget_tokens, retire_before_admit=retire_before_admit,
                      reject_oversized=reject_oversized, detail=hasattr(step_time_s, "of_step"))
    run_modelled(sched, dt_const, dt_fn, swap_cost)
    return result(sched, policy)


def check_requests(requests) -> list:
    """``requests`` as a list, each checked to be a :class:`Request` (TypeError naming it otherwise)."""
    if isinstance(requests, Request) or not hasattr(requests, "__iter__"):
        raise TypeError(f"requests must be a sequence of servelib.sim.Request, got {type(requests).__name__}")
    reqs = list(requests)
    for k, r in enumerate(reqs):
        if not isinstance(r, Request):
            raise TypeError(f"requests[{k}] must be a servelib.sim.Request, got {type(r).__name__}")
    return reqs


def token_budget(max_batched_tokens, max_batch):
    """The per-step token budget (``math.inf`` for None), checked against ``max_batch``."""
    if max_batched_tokens is None:
        return math.inf
    budget = _check.positive_int("max_batched_tokens", max_batched_tokens)
    if budget < max_batch:
        raise ValueError(f"max_batched_tokens ({budget}) must be >= max_batch ({max_batch}): "
                         "every running sequence decodes one token per step")
    return budget


def run_modelled(sched: Scheduler, dt_const, dt_fn, swap_cost: float = 0.0) -> None:
    """The simulator's executor: drive ``sched`` to the end with modelled step times.

    ``dt_const``: a constant step time (s), or None and ``dt_fn(step) -> s``. Each step also
    costs ``swap_cost`` seconds per KV token swapped. With a constant step time, runs of
    pure decode steps are written in one go (:meth:`Scheduler.coast`).
    """
    while True:
        step = sched.next_step()
        if step is None:
            if sched.finished:
                return
            sched.wait_until(sched.next_arrival_s)
            continue
        dt = dt_const if dt_fn is None else _checked_step_time(dt_fn, step)
        sched.end_step(dt + swap_cost * step.swap_tokens)
        if dt_fn is None and sched.can_coast():
            sched.coast(dt_const)


def _checked_step_time(dt_fn, step):
    """The model's duration for this step, checked like a constant one: a NaN would stall
    the clock forever and a negative one run it backwards."""
    dt = dt_fn(step)
    if type(dt) is float and 0 < dt < math.inf:
        return dt
    return _check.positive(f"step_time_s({step.batch}, {step.tokens}, {step.kv_tokens}) (the callable's result)", dt)


def result(sched: Scheduler, policy: str) -> SimResult:
    """The :class:`SimResult` of a run that ``sched`` has finished."""
    names = np.array(STATUS_NAMES)
    status = names[np.array(sched.st, dtype=int)] if sched.n else np.array([], dtype=str)
    arr = np.array(sched.arr, dtype=float)
    first, last, done = (np.array(x, dtype=float) for x in (sched.first_t, sched.last_t, sched.done_t))
    ok = status == "completed"
    out = np.array(sched.out, dtype=int)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(ok & (out > 1), (last - first) / (out - 1), np.nan)
    tr = Trace(*(np.array(c, dtype=float if k < 2 else np.int64) for k, c in enumerate(sched.trace)))
    start = float(arr.min()) if sched.n else 0.0
    pool = sched.pool
    return SimResult(
        policy=policy, ttft_s=np.where(ok, first - arr, np.nan), tpot_s=tpot,
        latency_s=np.where(ok, done - arr, np.nan), status=status,
        tier=np.array([r.tier for r in sched.reqs], dtype=str), output_len=out,
        rejections=tuple(sched.rejections),
        makespan_s=(sched.t - start) if tr.end_s.size else 0.0, n_steps=sched.s,
        n_oom_events=sched.oom_events, n_oom_killed=sched.oom_killed, oom_tokens_lost=sched.oom_lost,
        n_oom_killed_90pct_done=sched.oom_90, n_preempted=sched.n_pre,
        recomputed_tokens=sched.recomputed, swapped_tokens=sched.swapped_tok,
        preempted_steps=sched.pre_steps, kv_capacity_tokens=pool.capacity_tokens,
        kv_peak_tokens=pool.peak_alloc * pool.unit, kv_peak_used_tokens=pool.peak_used, trace=tr)
