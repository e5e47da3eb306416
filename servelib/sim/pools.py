"""Deployments of several replicas: one pool, or separate prefill and decode pools.

:func:`simulate_pool` runs ``n`` identical replicas (*instances*) that each prefill and
decode, as :func:`servelib.sim.simulate` runs one. :func:`simulate_disaggregated` runs a
prefill pool and a decode pool: a prefill instance reads a request's prompt and makes its
first token; the prompt's KV cache then crosses a link to a decode instance, which
generates the rest of the answer and never prefills. Each instance is one
:class:`~servelib.sim.scheduler.Scheduler` on the simulator's modelled clock, with the
step times of its own pool (each pool's model, GPU and TP degree in its
:class:`PoolSpec`; :func:`roofline_pool` builds one from the roofline).

Conventions, the same as :mod:`servelib.disagg`'s sizing:

* **Dispatch.** A request goes to an instance when it reaches a pool (arrival for the
  prefill or mixed pool, the end of its transfer for the decode pool), by a rule that
  looks at no instance's load: ``"round_robin"`` sends the k-th request to reach the pool
  (in time order, ties by input order) to instance ``k mod n``; ``"random"`` draws the
  instance uniformly (seeded), as the sizing assumes (a Poisson stream split at random
  gives each instance a Poisson stream). A load-aware router (least loaded) would need
  the instances stepped together and is not modelled.
* **TTFT includes the transfer.** The first token leaves the prefill instance with the KV
  and reaches the user when the transfer ends, as :func:`servelib.disagg.size_prefill_pool`
  charges it: TTFT = queue + prefill + transfer. Waiting for a slot on a decode instance
  falls in the first gap between tokens, so in TPOT. A one-token answer ends at the
  prefill: no transfer, and its latency is its TTFT.
* **Memory.** Every instance admits on the final length (it never runs out of KV memory
  and never preempts). A prefill instance frees a prompt's KV when the prefill ends (the
  few milliseconds the transfer holds it are not counted). A request whose final length
  can never fit one decode instance is rejected on arrival, before any prefill.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import _check
from ..disagg import kv_transfer_bytes, transfer_time_s
from ..memory import capacity
from .blocks import KVPool
from .core import Request, SimResult, Trace, _step_time_fn, check_requests, result, run_modelled, token_budget
from .scheduler import Scheduler
from .steptime import roofline_step_time

DISPATCHES = ("round_robin", "random")


@dataclass(frozen=True)
class PoolSpec:
    """``n_instances`` identical replicas doing one job, each as :func:`servelib.sim.simulate`
    models one replica (continuous batching, admission on the final length).

    ``step_time_s``: a constant, a callable ``f(batch, tokens, kv_tokens)`` or an object
    with ``of_step(step)``, as :func:`~servelib.sim.simulate` takes (the roofline's, at the
    pool's TP degree: :func:`roofline_pool`). ``max_batch``: most sequences in a step
    (1 for a prefill instance that takes one prompt at a time). ``kv_capacity_tokens``:
    one instance's KV budget in tokens (None: unlimited). ``block_size``: paged cache
    (None: contiguous). ``max_batched_tokens``: chunked prefill's token budget per step
    (None: whole prompts). ``tp_degree``: GPUs per instance, for counting GPUs (the step
    time carries the degree into the timing). Raises ValueError/TypeError naming the field.
    """

    n_instances: int
    step_time_s: object
    max_batch: int
    kv_capacity_tokens: int | None = None
    block_size: int | None = None
    max_batched_tokens: int | None = None
    tp_degree: int = 1

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "n_instances", _check.positive_int("n_instances", self.n_instances))
        set_(self, "max_batch", _check.positive_int("max_batch", self.max_batch))
        set_(self, "tp_degree", _check.positive_int("tp_degree", self.tp_degree))
        token_budget(self.max_batched_tokens, self.max_batch)
        _step_time_fn(self.step_time_s)
        KVPool(self.kv_capacity_tokens, self.block_size, "final")   # checks capacity and block size

    @property
    def n_gpus(self) -> int:
        """GPUs of the pool: instances x TP degree."""
        return self.n_instances * self.tp_degree


def roofline_pool(model, gpu, *, n_instances: int, tp_degree: int, max_batch: int,
                  max_batched_tokens: int | None = None, block_size: int | None = None, dtype: str = "bf16",
                  bytes_per_param: float = 2, bytes_per_elem: float = 2, reserve_fraction: float = 0.10,
                  overlap: bool = True) -> PoolSpec:
    """A :class:`PoolSpec` of ``n_instances`` replicas of ``model`` on ``tp_degree`` x ``gpu``.

    Step times from :func:`servelib.sim.roofline_step_time` at the pool's TP degree (the
    overlapped bound, or the serial one with ``overlap=False``); the KV budget is one
    replica's, from :func:`servelib.memory.capacity`, in tokens of the per-token figure.
    Raises ValueError when the weights leave no room for KV, or as the functions called.
    """
    tp = _check.positive_int("tp_degree", tp_degree)
    cap = capacity(model, gpu, n_gpus=tp, context_len=1, tp_degree=tp, bytes_per_param=bytes_per_param,
                   bytes_per_elem=bytes_per_elem, reserve_fraction=reserve_fraction)
    kv_tokens = int(cap.kv_budget_bytes_per_device // cap.kv_bytes_per_token_per_device)
    if kv_tokens < 1:
        raise ValueError(f"{model.name} at tp_degree={tp} leaves no KV memory on the GPU; raise tp_degree")
    step = roofline_step_time(model, gpu, dtype=dtype, bytes_per_param=bytes_per_param,
                              bytes_per_elem=bytes_per_elem, tp_degree=tp, overlap=overlap)
    return PoolSpec(n_instances, step, max_batch, kv_tokens, block_size, max_batched_tokens, tp)


def sized_pool(model, gpu, pool, **kwargs) -> PoolSpec:
    """The :class:`PoolSpec` of a pool sized by :mod:`servelib.disagg` (a
    :class:`servelib.disagg.Pool`), for :func:`roofline_pool`: its instances and TP degree,
    one prompt at a time for a prefill pool, the sized batch (and token budget, for a mixed
    pool) otherwise. ``kwargs``: :func:`roofline_pool`'s precision, ``reserve_fraction``,
    ``block_size`` and ``overlap`` (pass what the sizing used)."""
    from ..disagg import Pool
    _check.instance("pool", pool, Pool)
    return roofline_pool(model, gpu, n_instances=pool.n_instances, tp_degree=pool.tp_degree,
                         max_batch=1 if pool.role == "prefill" else pool.batch,
                         max_batched_tokens=pool.max_batched_tokens, **kwargs)


def kv_transfer_time(model, *, link_Bps: float, link_latency_s: float = 0.0, tp_degree: int = 1,
                     bytes_per_elem: float = 2):
    """``f(prompt_len) -> seconds``: the time to move one prompt's KV from a prefill instance
    at ``tp_degree`` to a decode instance, for ``simulate_disaggregated(transfer_s=...)``.

    Each device sends its shard (:func:`servelib.disagg.kv_transfer_bytes`) over its own
    link of ``link_Bps`` bytes/s after ``link_latency_s`` (:func:`servelib.disagg.transfer_time_s`).
    Pools in one NVLink domain can take the figures of their GPU's link,
    ``servelib.interconnect.get_link(gpu).bandwidth_Bps`` and ``.latency_s``; pools on
    different servers, their network's (a 400 Gb/s port is 50e9 bytes/s). Raises ValueError
    for a bandwidth that is not > 0 or a negative latency.
    """
    bw = _check.positive("link_Bps", link_Bps)
    latency = _check.non_negative("link_latency_s", link_latency_s)
    kv_transfer_bytes(model, 1, bytes_per_elem=bytes_per_elem, tp_degree=tp_degree)   # checks the rest

    def transfer_s(prompt_len: int) -> float:
        shard = kv_transfer_bytes(model, prompt_len, bytes_per_elem=bytes_per_elem, tp_degree=tp_degree)
        return transfer_time_s(shard, bw, latency)

    return transfer_s


@dataclass(frozen=True)
class PoolUsage:
    """How busy one pool of a deployment was (times in s).

    ``span_s``: from the first request to reach the pool to the end of the pool's last
    step. Over that span and averaged over instances: ``utilisation``, the share of time an
    instance was running a step; ``mean_batch``, sequences decoding on an instance (idle
    time counts 0; :attr:`servelib.disagg.Pool.mean_batch` predicts it);
    ``kv_mean_tokens``, KV tokens stored on an instance. ``kv_peak_tokens``: the most KV
    memory any one instance held (tokens, whole blocks when paged);
    ``kv_capacity_tokens``: one instance's budget. ``prefill_busy``: the share of time an
    instance was running a step that carries prompt tokens (for a prefill pool, its
    utilisation; :attr:`servelib.disagg.Pool.prefill_busy` predicts it).
    ``prefill_tokens``, ``decode_tokens``: tokens the pool's steps processed of each kind.
    """

    role: str
    n_instances: int
    tp_degree: int
    span_s: float
    utilisation: float
    prefill_busy: float
    mean_batch: float
    kv_mean_tokens: float
    kv_peak_tokens: int
    kv_capacity_tokens: float
    prefill_tokens: int
    decode_tokens: int

    @property
    def n_gpus(self) -> int:
        """GPUs of the pool: instances x TP degree."""
        return self.n_instances * self.tp_degree


@dataclass(frozen=True)
class DeploymentResult(SimResult):
    """What :func:`simulate_pool` or :func:`simulate_disaggregated` produced: a
    :class:`~servelib.sim.SimResult` for the whole deployment, so the two compare with the
    same methods (``percentile``, ``itl_percentile_s``, ``goodput_rps``, ``summary`` ...).

    Per request: ``ttft_s`` (arrival to the first token reaching the user, the transfer
    included), ``tpot_s``, ``latency_s``, ``status``, ``transfer_s`` (0 where there was
    none) and ``decode_wait_s``, the time its KV waited at a decode instance for the next
    step (the one under way, then any for a free slot: part of the gap before its second
    token; NaN where there was no decode pool). ``makespan_s``: first arrival to the end of
    the last step of any instance. ``n_steps`` and the preemption counts: summed over
    instances. KV figures
    (``kv_capacity_tokens``, ``kv_peak_tokens``, ``kv_peak_used_tokens``) are those of one
    instance of the pool that decodes (the most any one reached). ``trace``: every
    instance's steps, pool after pool and instance after instance (not in time order), so
    ITL percentiles count every decode token of the deployment; ``mean_in_system`` does
    not count requests whose KV is in transit.

    ``pools``: ``{role: PoolUsage}``, roles ``"mixed"``, or ``"prefill"`` and ``"decode"``.
    ``instances``: ``{role: tuple of SimResult}``, each instance's own run (a prefill
    instance sees one-token requests; a decode instance's TTFT is 0, its first token having
    come with the KV).
    """

    pools: dict = field(repr=False)
    instances: dict = field(repr=False)
    transfer_s: np.ndarray = field(repr=False)
    decode_wait_s: np.ndarray = field(repr=False)

    @property
    def n_gpus(self) -> int:
        """GPUs in the deployment, every pool's."""
        return sum(p.n_gpus for p in self.pools.values())


def _run(reqs, spec: PoolSpec, prefilled: bool = False):
    """One instance of ``spec`` serving ``reqs`` to the end: (its scheduler, its SimResult)."""
    dt_const, dt_fn = _step_time_fn(spec.step_time_s)
    sched = Scheduler(reqs, KVPool(spec.kv_capacity_tokens, spec.block_size, "final"), static=False,
                      max_batch=spec.max_batch, preemption=None,
                      budget_tokens=token_budget(spec.max_batched_tokens, spec.max_batch),
                      detail=hasattr(spec.step_time_s, "of_step"), prefilled=prefilled)
    run_modelled(sched, dt_const, dt_fn)
    return sched, result(sched, "continuous")


class _Pool:
    """The instances of one pool and the requests dispatched to each."""

    def __init__(self, role, spec, reqs, arrivals, indices, dispatch, rng, prefilled=False):
        self.role, self.spec = role, spec
        order = sorted(indices, key=lambda i: (arrivals[i], i))
        n = spec.n_instances
        picks = (np.arange(len(order)) % n if dispatch == "round_robin"
                 else rng.integers(n, size=len(order)))
        self.members = [[i for i, k in zip(order, picks) if k == j] for j in range(n)]
        self.runs = [_run([reqs[i] for i in m], spec, prefilled) for m in self.members]
        self.start = min((arrivals[i] for i in order), default=math.nan)

    def absolute(self, name):
        """``{request index: time}`` of a scheduler time column (``first_t``, ``done_t`` ...)."""
        return {i: t for m, (sched, _) in zip(self.members, self.runs) for i, t in zip(m, getattr(sched, name))}

    def decode_starts(self):
        """``{request index: start of its first decode step}`` on a decode instance: a request
        admitted while step s + 1 is planned has ``base = 1 - s`` (see ``Scheduler.start_decode``)."""
        return {i: sched.trace[0][1 - sched.base[k]] - sched.trace[1][1 - sched.base[k]]
                for m, (sched, res) in zip(self.members, self.runs) for k, i in enumerate(m)
                if res.status[k] == "completed"}

    def statuses(self):
        return {i: s for m, (_, res) in zip(self.members, self.runs) for i, s in zip(m, res.status)}

    def rejections(self):
        return [(m[k], reason) for m, (_, res) in zip(self.members, self.runs) for k, reason in res.rejections]

    def usage(self) -> PoolUsage:
        traces = [res.trace for _, res in self.runs]
        ends = [tr.end_s[-1] for tr in traces if tr.end_s.size]
        span = float(max(ends) - self.start) if ends else 0.0
        n = self.spec.n_instances

        def mean(per_step):
            return sum(float(np.dot(per_step(tr), tr.step_s)) for tr in traces) / (n * span) if span > 0 else 0.0

        results = [res for _, res in self.runs]
        decode = sum(int(tr.decode.sum()) for tr in traces)
        return PoolUsage(self.role, n, self.spec.tp_degree, span, mean(lambda tr: np.ones_like(tr.step_s)),
                         mean(lambda tr: tr.tokens > tr.decode), mean(lambda tr: tr.decode),
                         mean(lambda tr: tr.kv_used_tokens), max(r.kv_peak_tokens for r in results),
                         results[0].kv_capacity_tokens, sum(int(tr.tokens.sum()) for tr in traces) - decode, decode)


def _deployment(policy, reqs, pools, ttft, tpot, latency, status, rejections, transfer, wait) -> DeploymentResult:
    runs = [run for p in pools for run in p.runs]
    results = [res for _, res in runs]
    traces = [res.trace for res in results]
    tr = Trace(*(np.concatenate([getattr(t, f) for t in traces]) for f in Trace.__dataclass_fields__))
    ends = [t.end_s[-1] for t in traces if t.end_s.size]
    start = min((r.arrival_s for r in reqs), default=0.0)
    decoding = [res for _, res in pools[-1].runs]

    def total(name):
        return sum(getattr(r, name) for r in results)

    return DeploymentResult(
        policy=policy, ttft_s=np.array(ttft, dtype=float), tpot_s=np.array(tpot, dtype=float),
        latency_s=np.array(latency, dtype=float), status=np.array(status, dtype=str),
        tier=np.array([r.tier for r in reqs], dtype=str), output_len=np.array([r.output_len for r in reqs], dtype=int),
        rejections=tuple(sorted(rejections)), makespan_s=float(max(ends) - start) if ends else 0.0,
        n_steps=total("n_steps"), n_oom_events=total("n_oom_events"), n_oom_killed=total("n_oom_killed"),
        oom_tokens_lost=total("oom_tokens_lost"), n_oom_killed_90pct_done=total("n_oom_killed_90pct_done"),
        n_preempted=total("n_preempted"), recomputed_tokens=total("recomputed_tokens"),
        swapped_tokens=total("swapped_tokens"), preempted_steps=total("preempted_steps"),
        kv_capacity_tokens=decoding[0].kv_capacity_tokens, kv_peak_tokens=max(r.kv_peak_tokens for r in decoding),
        kv_peak_used_tokens=max(r.kv_peak_used_tokens for r in decoding), trace=tr,
        pools={p.role: p.usage() for p in pools},
        instances={p.role: tuple(res for _, res in p.runs) for p in pools},
        transfer_s=np.array(transfer, dtype=float), decode_wait_s=np.array(wait, dtype=float))


def _common(requests, dispatch, seed):
    reqs = check_requests(requests)
    _check.choice("dispatch", dispatch, DISPATCHES)
    return reqs, np.random.default_rng(_check.non_negative_int("seed", seed))


def _tpot(first, last, out):
    return (last - first) / (out - 1) if out > 1 else math.nan


def simulate_pool(requests, pool: PoolSpec, *, dispatch: str = "round_robin", seed: int = 0) -> DeploymentResult:
    """Run ``requests`` (a sequence of :class:`~servelib.sim.Request`) on ``pool``'s
    instances, each prefilling and decoding (a mixed pool; chunked prefill when the spec
    sets ``max_batched_tokens``); return a :class:`DeploymentResult` with role ``"mixed"``.

    ``dispatch``: ``"round_robin"`` or ``"random"`` (module docstring); ``seed`` seeds the
    random one. With one instance this is :func:`servelib.sim.simulate` with final
    admission. Raises ValueError/TypeError naming the argument.
    """
    reqs, rng = _common(requests, dispatch, seed)
    _check.instance("pool", pool, PoolSpec)
    n = len(reqs)
    mixed = _Pool("mixed", pool, reqs, [r.arrival_s for r in reqs], range(n), dispatch, rng)
    first, last, done = (mixed.absolute(k) for k in ("first_t", "last_t", "done_t"))
    status = mixed.statuses()
    ok = [status[i] == "completed" for i in range(n)]
    return _deployment(
        "continuous", reqs, [mixed],
        [first[i] - r.arrival_s if ok[i] else math.nan for i, r in enumerate(reqs)],
        [_tpot(first[i], last[i], r.output_len) if ok[i] else math.nan for i, r in enumerate(reqs)],
        [done[i] - r.arrival_s if ok[i] else math.nan for i, r in enumerate(reqs)],
        [status[i] for i in range(n)], mixed.rejections(), np.zeros(n), np.full(n, math.nan))


def simulate_disaggregated(requests, *, prefill: PoolSpec, decode: PoolSpec, transfer_s=0.0,
                           dispatch: str = "round_robin", seed: int = 0) -> DeploymentResult:
    """Run ``requests`` on a prefill pool and a decode pool; return a :class:`DeploymentResult`
    with roles ``"prefill"`` and ``"decode"``.

    A request queues for a ``prefill`` instance, whose step makes its first token; its KV
    then takes ``transfer_s`` seconds to reach a ``decode`` instance (a constant, or a
    function of the prompt length: :func:`kv_transfer_time` builds one from the model's KV
    bytes over a link), where it queues for a slot and decodes the rest of its answer
    (``output_len - 1`` tokens) holding the prompt's KV, with no prefill work there. TTFT
    ends with the transfer (module docstring: dispatch, memory and one-token answers).

    Raises ValueError/TypeError naming the argument; ValueError when ``transfer_s`` is, or
    returns, a negative or non-finite time.
    """
    reqs, rng = _common(requests, dispatch, seed)
    _check.instance("prefill", prefill, PoolSpec)
    _check.instance("decode", decode, PoolSpec)
    if callable(transfer_s):
        move = transfer_s
    else:
        fixed = _check.non_negative("transfer_s", transfer_s)

        def move(prompt_len):
            return fixed
    n = len(reqs)
    # A request that can never fit a decode instance is turned away before it is prefilled.
    fit = KVPool(decode.kv_capacity_tokens, decode.block_size, "final")
    shared = [fit.shared_tokens(r.prefix_len) if r.prefix_id is not None else 0 for r in reqs]
    too_big = [i for i, r in enumerate(reqs) if not fit.ever_fits(r.final_len - shared[i], shared[i])]
    rejections = [(i, f"final length {reqs[i].final_len} tokens (prompt {reqs[i].prompt_len} + max output "
                      f"{reqs[i].max_output_len}) exceeds the KV capacity of a decode instance, "
                      f"{fit.capacity_tokens:g} tokens") for i in too_big]
    skip = set(too_big)

    # Prefill: each request as a one-token request, which leaves its instance with that token.
    one_token = [Request(r.arrival_s, r.prompt_len, 1, 1, r.tier, r.prefix_id, r.prefix_len) for r in reqs]
    pre = _Pool("prefill", prefill, one_token, [r.arrival_s for r in reqs],
                [i for i in range(n) if i not in skip], dispatch, rng)
    rejections += [(i, f"prefill instance: {why}") for i, why in pre.rejections()]
    pre_status, pre_end = pre.statuses(), pre.absolute("first_t")

    transfer = np.zeros(n)
    to_decode, at_decode = [], {}
    for i, r in enumerate(reqs):
        if pre_status.get(i) == "completed" and r.output_len > 1:
            transfer[i] = _check.non_negative(f"transfer_s({r.prompt_len}) (the callable's result)",
                                              move(r.prompt_len))
            at_decode[i] = pre_end[i] + transfer[i]
            to_decode.append(i)
    moved = [Request(at_decode[i], r.prompt_len, r.output_len, r.max_output_len, r.tier, r.prefix_id, r.prefix_len)
             if i in at_decode else r for i, r in enumerate(reqs)]
    dec = _Pool("decode", decode, moved, at_decode, to_decode, dispatch, rng, prefilled=True)
    last, done, dec_status = dec.absolute("last_t"), dec.absolute("done_t"), dec.statuses()
    started = dec.decode_starts()

    ttft, tpot, latency, status = [], [], [], []
    for i, r in enumerate(reqs):
        if i in at_decode:
            ok = dec_status[i] == "completed"
            end_first, end = at_decode[i], done[i]
            tpot.append(_tpot(at_decode[i], last[i], r.output_len) if ok else math.nan)
            status.append(dec_status[i])
        else:
            ok = pre_status.get(i) == "completed"
            end_first = end = pre_end.get(i, math.nan)
            tpot.append(math.nan)
            status.append(pre_status.get(i, "rejected"))
        ttft.append(end_first - r.arrival_s if ok else math.nan)
        latency.append(end - r.arrival_s if ok else math.nan)
    wait = [started[i] - at_decode[i] if i in started else math.nan for i in range(n)]
    return _deployment("disaggregated", reqs, [pre, dec], ttft, tpot, latency, status, rejections, transfer, wait)

