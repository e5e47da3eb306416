"""The step loop of one serving replica: static or continuous batching over a KV budget.

Time advances one model step at a time. In a step every running sequence decodes one
token and newly admitted sequences prefill (their whole prompt, or a chunk of it when
``max_batched_tokens`` is set); the prefill's last chunk yields the request's first token.
A step's duration is a constant or a function of its shape (see :func:`simulate`).

Conventions (the chapter "Scheduling" derives and uses them):

* A sequence that has generated ``g`` tokens holds ``prompt_len + g`` tokens of KV; its
  *final length* is ``prompt_len + output_len`` and what the scheduler can know in advance
  is ``prompt_len + max_output_len``.
* Memory is counted in *units*: tokens for contiguous caches, blocks of ``block_size``
  tokens for paged ones (:mod:`servelib.sim.blocks`).
* Cost is O(1) per step plus O(log n) per event (admission, completion, preemption), so a
  run of 10,000 requests and millions of decode tokens takes about a second.
"""
from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .. import _check
from .blocks import KVPool

TIERS = ("interactive", "batch")
POLICIES = ("continuous", "static")
ADMISSIONS = ("final", "prompt")
PREEMPTIONS = (None, "recompute", "swap")

# Request states.
_FUTURE, _WAITING, _PREFILL, _DECODE, _HELD, _DONE, _REJECTED, _KILLED, _STARVED = range(9)
STATUS_NAMES = ("future", "waiting", "prefill", "decode", "held", "completed", "rejected",
                "oom_killed", "starved")


@dataclass(frozen=True)
class Request:
    """One request as the scheduler sees it.

    ``arrival_s``: arrival time in seconds (>= 0). ``prompt_len``: prompt tokens (>= 1).
    ``output_len``: tokens the model will actually generate (>= 1; unknown to the scheduler).
    ``max_output_len``: the cap the client asked for, which the scheduler does know
    (default ``output_len``; must be >= ``output_len``). ``tier``: ``"interactive"`` or
    ``"batch"`` (reported separately; the scheduler treats both first come, first served).
    ``prefix_id`` / ``prefix_len``: requests with the same ``prefix_id`` share their first
    ``prefix_len`` prompt tokens (a system prompt); a paged cache stores the full blocks of
    that prefix once, reference-counted. Raises ValueError/TypeError naming the field.
    """

    arrival_s: float
    prompt_len: int
    output_len: int
    max_output_len: int | None = None
    tier: str = "interactive"
    prefix_id: str | None = None
    prefix_len: int = 0

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "arrival_s", _check.non_negative("arrival_s", self.arrival_s))
        set_(self, "prompt_len", _check.positive_int("prompt_len", self.prompt_len))
        set_(self, "output_len", _check.positive_int("output_len", self.output_len))
        cap = self.output_len if self.max_output_len is None else \
            _check.positive_int("max_output_len", self.max_output_len)
        if cap < self.output_len:
            raise ValueError(f"max_output_len ({cap}) must be >= output_len ({self.output_len}): "
                             "the model stops at the cap")
        set_(self, "max_output_len", cap)
        _check.choice("tier", self.tier, TIERS)
        set_(self, "prefix_len", _check.non_negative_int("prefix_len", self.prefix_len))
        if self.prefix_len > self.prompt_len:
            raise ValueError(f"prefix_len ({self.prefix_len}) must be <= prompt_len ({self.prompt_len})")
        if self.prefix_len and self.prefix_id is None:
            raise ValueError("prefix_len > 0 needs a prefix_id naming the shared prefix")

    @property
    def final_len(self) -> int:
        """The most KV tokens this request can ever hold: ``prompt_len + max_output_len``."""
        return self.prompt_len + self.max_output_len


@dataclass(frozen=True)
class Trace:
    """Per-step record of a run (numpy arrays, one entry per step, in step order).

    ``end_s``: time at the end of the step (s). ``step_s``: its duration (s). ``batch``:
    sequences in the batch (static batching counts finished members it still carries).
    ``decode``: sequences that decoded a token. ``tokens``: tokens processed (decode tokens
    plus prefill tokens). ``kv_used_tokens``: tokens of KV actually stored (a shared prefix
    once). ``kv_allocated_tokens``: tokens of memory held (reservations, or whole blocks).
    ``waiting``: requests queued at the start of the step.
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
        return len(self.status)

    @property
    def n_completed(self) -> int:
        return int(np.sum(self.status == "completed"))

    @property
    def n_rejected(self) -> int:
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
    if callable(step_time_s):
        return None, step_time_s
    return _check.positive("step_time_s", step_time_s), None


def simulate(requests, *, policy: str = "continuous", max_batch: int, kv_capacity_tokens=None,
             admission: str = "final", block_size: int | None = None, preemption: str | None = None,
             max_batched_tokens: int | None = None, step_time_s, retire_before_admit: bool = True,
             reject_oversized: bool = True, swap_s_per_token: float = 0.0) -> SimResult:
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
    re-prefill it later) or ``"swap"`` (copy it to host memory and back; each token copied
    costs ``swap_s_per_token`` seconds of the step). Preempted requests rejoin the head of
    the queue. ``block_size``: tokens per block of a paged cache allocated on demand (None:
    contiguous, where final admission reserves the whole final length up front).

    A request whose final length can never fit (more than the whole budget, in blocks when
    paged) is rejected on arrival with a reason; with ``reject_oversized=False`` it is queued
    instead, and, first come first served, it and everyone behind it wait forever
    (``"starved"``). ``retire_before_admit=False`` retires finished sequences only after the
    next admission (a scheduler bug the chapter shows). ``max_batched_tokens``: chunked
    prefill, at most this many tokens per step, decode tokens first, prompts chunked into
    the rest (>= ``max_batch``; continuous only).

    ``step_time_s``: seconds per step (> 0), a constant or a callable ``f(batch, tokens, kv_tokens)``
    of the sequences in the step, the tokens it processes (one per decoding sequence, plus
    prefill tokens, plus the padding rows of a static batch's finished members) and the KV
    tokens stored when it starts (:func:`servelib.sim.roofline_step_time` builds one from
    the roofline model).

    Raises ValueError/TypeError naming the argument for bad input, and ValueError for
    combinations that have no meaning (preemption with final admission, which never runs out
    of memory; preemption or chunked prefill with static batching).
    """
    if isinstance(requests, Request) or not hasattr(requests, "__iter__"):
        raise TypeError(f"requests must be a sequence of servelib.sim.Request, got {type(requests).__name__}")
    reqs = list(requests)
    for k, r in enumerate(reqs):
        if not isinstance(r, Request):
            raise TypeError(f"requests[{k}] must be a servelib.sim.Request, got {type(r).__name__}")
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
    budget_tokens = math.inf
    if max_batched_tokens is not None:
        budget_tokens = _check.positive_int("max_batched_tokens", max_batched_tokens)
        if budget_tokens < max_batch:
            raise ValueError(f"max_batched_tokens ({budget_tokens}) must be >= max_batch ({max_batch}): "
                             "every running sequence decodes one token per step")
    dt_const, dt_fn = _step_time_fn(step_time_s)
    swap_cost = _check.non_negative("swap_s_per_token", swap_s_per_token)
    if not isinstance(retire_before_admit, bool) or not isinstance(reject_oversized, bool):
        raise TypeError("retire_before_admit and reject_oversized must be True or False")
    pool = KVPool(kv_capacity_tokens, block_size, admission)

    return _Run(reqs, pool, static, max_batch, preemption, budget_tokens, dt_const, dt_fn,
                swap_cost, retire_before_admit, reject_oversized).run(policy)


class _Run:
    """The mutable state of one :func:`simulate` run (per-request state in plain lists: fast)."""

    def __init__(self, reqs, pool, static, max_batch, preemption, budget_tokens, dt_const, dt_fn,
                 swap_cost, retire_before_admit, reject_oversized):
        self.reqs, self.pool, self.static, self.max_batch = reqs, pool, static, max_batch
        self.preemption, self.budget_tokens = preemption, budget_tokens
        self.dt_const, self.dt_fn, self.swap_cost = dt_const, dt_fn, swap_cost
        self.rba, self.reject_oversized = retire_before_admit, reject_oversized
        n = self.n = len(reqs)
        self.arr = [r.arrival_s for r in reqs]
        self.prompt = [r.prompt_len for r in reqs]
        self.out = [r.output_len for r in reqs]
        self.shared = [pool.shared_tokens(r.prefix_len) if r.prefix_id is not None else 0 for r in reqs]
        # A prefix group is an id and a length: requests share the blocks they all declare.
        codes = {}
        self.pfx = [-1 if not sh else codes.setdefault((r.prefix_id, sh), len(codes))
                    for r, sh in zip(reqs, self.shared)]
        self.own_final = [r.final_len - sh for r, sh in zip(reqs, self.shared)]
        self.order = sorted(range(n), key=self.arr.__getitem__)
        self.st = [_FUTURE] * n
        self.g = [0] * n          # tokens generated (for a decoding request: base + step)
        self.base = [0] * n
        self.key = [0] * n        # block-boundary phase of a decoding request (KVPool)
        self.ep = [0] * n         # bumps whenever a request leaves the batch (lazy heap deletion)
        self.rem = [0] * n        # prefill tokens still to process
        self.swapped = [False] * n
        self.left_at = [-1] * n   # step at which a preempted request left the batch
        self.first_t = [math.nan] * n
        self.last_t = [math.nan] * n
        self.done_t = [math.nan] * n
        self.rejections = []
        self.waiting = deque()
        self.prefilling = []      # FCFS
        self.fin = []             # heap (finish step, i, epoch) of decoding requests
        self.lifo = []            # heap (-admission seq, i, epoch): newest first, for preemption
        self.held = []            # finished, still holding slot and memory (static batch; late retire)
        self.n_dec = self.in_flight = self.adm_seq = 0
        self.t, self.s = 0.0, 0   # time, index of the last completed step
        self.oom_events = self.oom_killed = self.oom_lost = self.oom_90 = 0
        self.n_pre = self.recomputed = self.swapped_tok = self.pre_steps = 0
        self.step_swap = 0

    # -- state changes -------------------------------------------------------------------
    def own_now(self, i):
        st = self.st[i]
        g = self.base[i] + self.s if st == _DECODE else self.g[i] + (st == _PREFILL)
        return self.prompt[i] + g - self.shared[i]

    def stop_decode(self, i):
        self.g[i] = self.base[i] + self.s
        self.pool.leave_decode(self.key[i])
        self.n_dec -= 1

    def release(self, i):
        """Free the memory and the batch slot of request i (held, prefilling or decoding)."""
        own = self.own_now(i)
        if self.st[i] == _DECODE:
            self.stop_decode(i)
        self.pool.free(own, self.own_final[i], self.shared[i], self.pfx[i])
        self.ep[i] += 1
        self.in_flight -= 1

    def start_decode(self, i):
        """Request i holds prompt + g tokens at the end of step s and decodes from step s + 1."""
        self.st[i] = _DECODE
        self.base[i] = self.g[i] - self.s
        self.key[i] = self.pool.enter_decode(self.prompt[i] + self.g[i] - self.shared[i], self.s)
        self.n_dec += 1
        heapq.heappush(self.fin, (self.out[i] - self.base[i], i, self.ep[i]))

    def finish(self, i):
        """Request i produced its last token in the step that just ended."""
        self.g[i] = self.out[i]
        self.st[i] = _HELD
        self.last_t[i] = self.t
        if self.static or not self.rba:
            self.held.append(i)
        else:
            self.retire(i, self.t)

    def retire(self, i, t):
        self.release(i)
        self.st[i] = _DONE
        self.done_t[i] = t

    def retire_held(self):
        for i in self.held:
            self.retire(i, self.last_t[i])
        self.held.clear()

    def admit(self, i):
        """Admit the head of the queue if memory allows it; return True if admitted."""
        pool, ctx = self.pool, self.prompt[i] + self.g[i]
        own = ctx - self.shared[i]
        swap_in = self.swapped[i]
        if swap_in:
            if not pool.try_swap_in(own, self.shared[i], self.pfx[i]):
                return False
            self.swapped[i] = False
            self.swapped_tok += own
            self.step_swap += own
        else:
            if not pool.try_admit(own, self.own_final[i], self.shared[i], self.pfx[i]):
                return False
            if self.g[i]:
                self.recomputed += ctx
        if self.left_at[i] >= 0:
            self.pre_steps += self.s - self.left_at[i]
            self.left_at[i] = -1
        self.waiting.popleft()
        self.in_flight += 1
        self.adm_seq += 1
        heapq.heappush(self.lifo, (-self.adm_seq, i, self.ep[i]))
        if swap_in:
            self.start_decode(i)
        else:
            self.st[i] = _PREFILL
            self.rem[i] = ctx
            self.prefilling.append(i)
        return True

    def in_batch(self):
        """Requests holding a batch slot (prefilling, decoding or finished but held)."""
        return [i for _, i, e in self.lifo if e == self.ep[i] and self.st[i] in (_PREFILL, _DECODE, _HELD)]

    def kill_all(self):
        """Out of memory: every request in the batch dies and its tokens are thrown away."""
        self.oom_events += 1
        for i in self.in_batch():
            g = self.out[i] if self.st[i] == _HELD else \
                self.base[i] + self.s if self.st[i] == _DECODE else self.g[i]
            self.oom_killed += 1
            self.oom_lost += g
            self.oom_90 += g >= 0.9 * self.out[i]
            self.st[i] = _KILLED
            self.ep[i] += 1
        self.pool.reset()
        self.prefilling.clear()
        self.fin.clear()
        self.lifo.clear()
        self.held.clear()
        self.n_dec = self.in_flight = 0

    def preempt_newest(self):
        """Evict the most recently admitted running request to the head of the queue."""
        while True:
            _, i, e = heapq.heappop(self.lifo)
            if e == self.ep[i] and self.st[i] in (_PREFILL, _DECODE):
                break
        was_prefill = self.st[i] == _PREFILL
        if was_prefill:
            self.prefilling.remove(i)
            self.recomputed += self.prompt[i] + self.g[i] - self.rem[i]
        self.release(i)
        self.n_pre += 1
        self.left_at[i] = self.s
        if self.preemption == "swap" and not was_prefill:
            own = self.prompt[i] + self.g[i] - self.shared[i]
            self.swapped[i] = True
            self.swapped_tok += own
            self.step_swap += own
        self.st[i] = _WAITING
        self.waiting.appendleft(i)

    # -- the loop ------------------------------------------------------------------------
    def run(self, policy):
        pool, arr, order, n, waiting = self.pool, self.arr, self.order, self.n, self.waiting
        trace = ([], [], [], [], [], [], [], [])
        nxt = 0
        while True:
            # Arrivals up to now join the queue, or are rejected if they can never fit.
            while nxt < n and arr[order[nxt]] <= self.t:
                i = order[nxt]
                nxt += 1
                r = self.reqs[i]
                if self.reject_oversized and not pool.ever_fits(self.own_final[i], self.shared[i]):
                    self.st[i] = _REJECTED
                    self.rejections.append((i, (
                        f"final length {r.final_len} tokens (prompt {r.prompt_len} + max output "
                        f"{r.max_output_len}) exceeds the KV capacity of {pool.capacity_tokens:g} tokens")))
                else:
                    self.st[i] = _WAITING
                    waiting.append(i)
            n_waiting = len(waiting)
            self.step_swap = 0

            # Running sequences' growth comes first (vLLM's order): if it does not fit,
            # preempt the newest sequence, or without preemption the whole batch dies.
            while not pool.reserve_growth(self.s + 1):
                if self.held and not self.static:
                    self.retire_held()    # finished sequences go before anyone is evicted
                    continue
                if self.preemption is None or self.n_dec + len(self.prefilling) <= 1:
                    self.kill_all()
                    pool.reserve_growth(self.s + 1)
                    break
                self.preempt_newest()

            # Admission: continuous at every step; static only into an empty replica.
            # Decode tokens take the step's token budget first, then queued prefill work.
            released = False
            if not self.static or self.in_flight == 0:
                cap = self.budget_tokens - self.n_dec - sum(self.rem[i] for i in self.prefilling)
                while waiting and self.in_flight < self.max_batch and cap > 0:
                    i = waiting[0]
                    if not self.admit(i):
                        break
                    cap -= self.rem[i] if self.st[i] == _PREFILL else 1
                if not self.static and self.held:
                    # retire_before_admit=False: last step's finished sequences leave only now.
                    self.retire_held()
                    released = True

            if self.in_flight == 0:
                if released:
                    continue
                if waiting:
                    # The head of the queue cannot fit even into an empty replica: first come,
                    # first served, it and everything behind it wait forever.
                    for i in list(waiting) + order[nxt:]:
                        self.st[i] = _STARVED
                    waiting.clear()
                    nxt = n
                if nxt >= n:
                    break
                self.t = max(self.t, arr[order[nxt]])
                continue

            # The step: prefill chunks in FCFS order within the token budget, one decode
            # token per decoding sequence (static batches also compute their finished rows).
            cap = self.budget_tokens - self.n_dec
            tokens = self.n_dec + (len(self.held) if self.static else 0)
            completing = []
            for i in self.prefilling:
                if cap <= 0:
                    break
                c = min(self.rem[i], cap)
                self.rem[i] -= c
                cap -= c
                tokens += c
                if self.rem[i] == 0:
                    completing.append(i)
            batch = self.in_flight
            kv = pool.used_tokens
            dt = self.dt_const if self.dt_fn is None else self.step_time(batch, tokens, kv)
            dt += self.swap_cost * self.step_swap
            self.t += dt
            self.s += 1
            n_decoded = self.n_dec
            pool.end_step(n_decoded)
            for col, v in zip(trace, (self.t, dt, batch, n_decoded, tokens, pool.used_tokens,
                                      pool.allocated_tokens, n_waiting)):
                col.append(v)

            # Decoding sequences that reached their output length finish.
            fin, s = self.fin, self.s
            while fin and fin[0][0] <= s:
                _, i, e = heapq.heappop(fin)
                if e == self.ep[i] and self.st[i] == _DECODE:
                    self.stop_decode(i)
                    self.finish(i)
            # Completed prefills produced their first token (or, after recompute, the next).
            if completing:
                done = set(completing)
                self.prefilling = [i for i in self.prefilling if i not in done]
                for i in completing:
                    self.g[i] += 1
                    if math.isnan(self.first_t[i]):
                        self.first_t[i] = self.t
                    if self.g[i] == self.out[i]:
                        self.finish(i)
                    else:
                        self.start_decode(i)
            if self.static and self.held and len(self.held) == self.in_flight:
                for i in self.held:
                    self.retire(i, self.t)
                self.held.clear()
            if (self.dt_fn is None and self.n_dec and not self.prefilling
                    and (self.static or not (self.held or waiting))):
                self.coast(trace, arr[order[nxt]] if nxt < n else math.inf)
        return self.result(policy, trace)

    def step_time(self, batch, tokens, kv):
        """The callable's duration for this step, checked like a constant one: a NaN would stall
        the clock forever and a negative one run it backwards."""
        dt = self.dt_fn(batch, tokens, kv)
        if type(dt) is float and 0 < dt < math.inf:
            return dt
        return _check.positive(f"step_time_s({batch}, {tokens}, {kv}) (the callable's result)", dt)

    def coast(self, trace, next_arrival_s):
        """Run, in one go, the coming decode steps in which only token counts change.

        With a constant step time, steps with no arrival, completion, prefill or new block
        differ only in the tokens stored, which grow by ``n_dec`` a step: their trace rows are
        written directly. The result is exactly that of stepping one by one.
        """
        pool, s, n_dec = self.pool, self.s, self.n_dec
        limit = self.fin[0][0] - 1 - s
        if pool.grows:
            u = pool.unit
            for j in range(1, min(limit, u) + 1):
                if pool.count[(-(s + j)) % u]:
                    limit = j - 1
                    break
        t, dt, ends = self.t, self.dt_const, []
        while len(ends) < limit and t < next_arrival_s:
            t += dt
            ends.append(t)
        k = len(ends)
        if not k:
            return
        used0 = pool.used_tokens
        pool.used_tokens += n_dec * k
        pool.peak_used = max(pool.peak_used, pool.used_tokens)
        self.t, self.s = t, s + k
        tokens = n_dec + (len(self.held) if self.static else 0)
        for col, v in zip(trace, (ends, [dt] * k, [self.in_flight] * k, [n_dec] * k, [tokens] * k,
                                  range(used0 + n_dec, pool.used_tokens + 1, n_dec),
                                  [pool.allocated_tokens] * k, [len(self.waiting)] * k)):
            col.extend(v)

    def result(self, policy, trace):
        names = np.array(STATUS_NAMES)
        status = names[np.array(self.st, dtype=int)] if self.n else np.array([], dtype=str)
        arr = np.array(self.arr, dtype=float)
        first, last, done = (np.array(x, dtype=float) for x in (self.first_t, self.last_t, self.done_t))
        ok = status == "completed"
        out = np.array(self.out, dtype=int)
        with np.errstate(invalid="ignore", divide="ignore"):
            tpot = np.where(ok & (out > 1), (last - first) / (out - 1), np.nan)
        tr = Trace(*(np.array(c, dtype=float if k < 2 else np.int64) for k, c in enumerate(trace)))
        start = float(arr.min()) if self.n else 0.0
        return SimResult(
            policy=policy, ttft_s=np.where(ok, first - arr, np.nan), tpot_s=tpot,
            latency_s=np.where(ok, done - arr, np.nan), status=status,
            tier=np.array([r.tier for r in self.reqs], dtype=str), output_len=out,
            rejections=tuple(self.rejections),
            makespan_s=(self.t - start) if tr.end_s.size else 0.0, n_steps=self.s,
            n_oom_events=self.oom_events, n_oom_killed=self.oom_killed, oom_tokens_lost=self.oom_lost,
            n_oom_killed_90pct_done=self.oom_90, n_preempted=self.n_pre,
            recomputed_tokens=self.recomputed, swapped_tokens=self.swapped_tok,
            preempted_steps=self.pre_steps, kv_capacity_tokens=self.pool.capacity_tokens,
            kv_peak_tokens=self.pool.peak_alloc * self.pool.unit,
            kv_peak_used_tokens=self.pool.peak_used, trace=tr)
