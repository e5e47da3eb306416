"""A serving engine over the toy decoder: the simulator's scheduler, real forward passes.

:class:`Engine` runs a list of :class:`servelib.sim.Request` through the same
:class:`servelib.sim.Scheduler` that :func:`servelib.sim.simulate` drives. Where the simulator
charges each step a modelled duration, the engine builds the step's batch from its block
tables, runs the decoder (:class:`~servelib.engine.model.PagedDecoder`), samples the next
tokens (greedy), and charges the time the step really took on the clock. So the two report
the same :class:`servelib.sim.SimResult` for the same workload, and where they differ the
step-time model is what is wrong, not the scheduling.

What happens in one step (``Engine._run_step``):

1. the scheduler decides: arrivals, growth, preemption or an out-of-memory kill, admission,
   prefill chunks (the executor is told of each admission and release, and allocates or
   frees blocks as the scheduler's own accounting does);
2. every decoding sequence whose blocks are full takes one more block;
3. one forward pass over all rows: decode tokens, static padding rows, prefill chunks;
4. the next token of each decoding sequence and each completed prefill is the argmax;
5. the scheduler is told how long the step took, and retires what finished.

After every step the engine checks that its pool holds exactly the blocks the scheduler's
accounting says (:class:`servelib.sim.blocks.KVPool`): the two are one cache seen twice.
"""
from __future__ import annotations

import dataclasses
import math
import sys
import time
import zlib
from dataclasses import dataclass
from numbers import Real

import numpy as np
import torch

from .. import _check
from ..measure.device import DeviceInfo, pick_device
from ..measure.toy import ToyDecoder
from ..sim.blocks import KVPool
from ..sim.core import ADMISSIONS, POLICIES, SimResult, check_requests, result, token_budget
from ..sim.scheduler import Scheduler
from .cache import OutOfBlocks, PagedKVCache
from .model import Batch, PagedDecoder, engine_spec


@dataclass
class EngineRun:
    """What :meth:`Engine.run` measured.

    ``result``: the :class:`servelib.sim.SimResult` (per-request TTFT, TPOT, latency; the
    per-step trace with measured step durations and KV blocks held); ``steps``: the
    scheduler's :class:`servelib.sim.Step` for every step, in order (the shapes a step-time
    model is fitted on); ``tokens``: the token ids each request generated; ``logits``: per
    request, the logits of each generated token (only with ``record_logits=True``);
    ``oom_errors``: the pool's own error message at each out-of-memory kill; ``config``: the
    run's settings; ``device``: where it ran; ``wall_s``: the run's wall-clock time.
    """

    result: SimResult
    steps: list
    tokens: list
    logits: list | None
    oom_errors: list
    config: dict
    device: DeviceInfo
    wall_s: float


class _Seq:
    """A sequence the engine holds: its tokens (prompt + generated), block table, prefill progress."""

    __slots__ = ("tokens", "table", "done")

    def __init__(self, tokens):
        self.tokens, self.table, self.done = tokens, [], 0


class Engine:
    """A serving engine over a random-weight toy decoder on ``device``.

    ``size``: the toy model (:func:`~servelib.engine.model.engine_spec`: 'tiny' for tests,
    'small' for the chapter). ``device``: a :class:`servelib.measure.DeviceInfo`, or a name
    for :func:`servelib.measure.pick_device` ('cuda', 'mps', 'cpu'; default: CUDA, else MPS,
    else CPU); ``dtype``: 'bf16', 'fp16' or 'fp32' (default: the device's). Or pass
    ``model``, a :class:`servelib.measure.ToyDecoder` (the measurement chapters' own, say),
    which brings its device and dtype. ``seed`` (an integer >= 0) seeds the weights and the
    prompts' token ids. Raises ValueError for a bad size, dtype or device name, ValueError or
    TypeError for a bad seed, TypeError for a device or model of the wrong type, and
    RuntimeError for a device this machine lacks.
    """

    def __init__(self, size: str = "small", *, device: DeviceInfo | str | None = None, dtype: str | None = None,
                 seed: int = 0, model: ToyDecoder | None = None):
        self.seed = _check.non_negative_int("seed", seed)
        if model is None:
            if isinstance(device, str):
                device = pick_device(_check.choice("device", device, ("cuda", "mps", "cpu")))
            elif device is None:
                device = pick_device()
            _check.instance("device", device, DeviceInfo, "a DeviceInfo, 'cuda', 'mps', 'cpu' or None")
            model = ToyDecoder(engine_spec(device.kind, size), device, dtype, seed=self.seed)
        self.model = _check.instance("model", model, ToyDecoder)
        self.device = model.device
        self.dtype = model.dtype
        self.spec = model.spec
        self._cache = None

    def __str__(self) -> str:
        s = self.spec
        # Two lines: the model, then where it runs (each fits a book page's column).
        return (f"{s.name}: {self.model.n_params / 1e6:.1f}M parameters ({s.n_layers} layers, hidden "
                f"{s.hidden_size}, {s.n_heads} heads / {s.n_kv_heads} KV heads)\n{self.dtype} on "
                f"{self.device.kind} ({self.device.name}), {torch.get_num_threads()} threads, torch {torch.__version__}")

    def cache(self, kv_capacity_tokens: int, block_size: int) -> PagedKVCache:
        """The pool for a run: ``kv_capacity_tokens // block_size`` blocks (kept between runs of the same shape)."""
        n_blocks = kv_capacity_tokens // block_size
        c = self._cache
        if c is None or (c.n_blocks, c.block_size) != (n_blocks, block_size):
            self._cache = None
            c = self._cache = PagedKVCache(self.spec, n_blocks, block_size, self.device.kind, self.dtype)
        return c

    def prompt_tokens(self, i: int, req) -> list[int]:
        """Token ids of request ``i``'s prompt: seeded per request; a shared prefix is seeded by
        its ``prefix_id``, so requests that share it share its tokens (and its keys and values)."""
        vocab = self.spec.vocab_size
        rng = np.random.default_rng([self.seed, i])
        ids = rng.integers(0, vocab, req.prompt_len).tolist()
        if req.prefix_len:
            key = zlib.crc32(str(req.prefix_id).encode())
            ids[:req.prefix_len] = np.random.default_rng([self.seed, key, 1]).integers(0, vocab, req.prefix_len).tolist()
        return ids

    def run(self, requests, *, policy: str = "continuous", max_batch: int, kv_capacity_tokens: int = 65_536,
            block_size: int = 16, admission: str = "final", preemption: str | None = None,
            max_batched_tokens: int | None = None, reserve_max: bool = False, offline: bool = False,
            skip_idle: bool = True, reject_oversized: bool = True, record_logits: bool = False,
            progress: bool = False, clock=time.perf_counter) -> EngineRun:
        """Serve ``requests`` (a sequence of :class:`servelib.sim.Request`); return an :class:`EngineRun`.

        Scheduling arguments are those of :func:`servelib.sim.simulate` (``policy``,
        ``max_batch``, ``admission``, ``preemption``, ``max_batched_tokens``,
        ``reject_oversized``), with the KV cache a pool of ``kv_capacity_tokens // block_size``
        blocks of ``block_size`` tokens. Preemption is by recompute only (as in vLLM's V1
        engine): ``"swap"`` raises ValueError. ``reserve_max=True`` makes each sequence take
        the blocks of its final length (prompt + max output) when admitted, as a contiguous
        cache must reserve them; the default takes blocks as the sequence grows.

        ``offline=True`` queues every request at t = 0 and runs as fast as possible; otherwise
        the run is an open-loop replay: each request joins the queue when the engine's clock
        passes its ``arrival_s``. When nothing is in flight the clock jumps to the next arrival
        (``skip_idle=True``: nothing runs in between, so the figures are those of a replay in
        real time) or the engine sleeps until it (``skip_idle=False``). ``record_logits``
        keeps every generated token's logits (memory grows with the run: tests only).
        ``progress`` shows a progress bar of tokens generated on stderr once a run lasts 2 s.
        ``clock``: the function read for the time, in seconds (default the wall clock,
        ``time.perf_counter``). ``time.thread_time`` counts only the time this thread ran: on
        a CPU shared with other work, and with one torch thread, it takes that other work out
        of a measurement (a diagnostic; latency is wall-clock time). Every reading must be a
        finite number of seconds, never earlier than the one before (TypeError/ValueError
        naming ``clock`` otherwise). Each run starts from an empty pool, so a run that failed
        leaves nothing behind that changes the next.
        """
        reqs = check_requests(requests)
        if offline:
            reqs = [dataclasses.replace(r, arrival_s=0.0) for r in reqs]
        _check.choice("policy", policy, POLICIES)
        max_batch = _check.positive_int("max_batch", max_batch)
        _check.choice("admission", admission, ADMISSIONS)
        if preemption is not None:
            if preemption == "swap":
                raise ValueError("preemption='swap' is not supported by the engine: it preempts by "
                                 "recompute, as vLLM's V1 engine does; use preemption='recompute'")
            _check.choice("preemption", preemption, ("recompute",))
            if admission == "final":
                raise ValueError("preemption needs admission='prompt': final admission never overflows memory")
        static = policy == "static"
        if static and (preemption is not None or max_batched_tokens is not None):
            raise ValueError("preemption and max_batched_tokens need policy='continuous'")
        if reserve_max and admission != "final":
            raise ValueError("reserve_max=True reserves the final length: it needs admission='final'")
        block_size = _check.positive_int("block_size", block_size)
        cap = _check.positive_int("kv_capacity_tokens", kv_capacity_tokens)
        if cap < block_size:
            raise ValueError(f"kv_capacity_tokens ({cap}) must hold at least one block of {block_size} tokens")
        for name, v in (("reserve_max", reserve_max), ("offline", offline), ("skip_idle", skip_idle),
                        ("reject_oversized", reject_oversized), ("record_logits", record_logits),
                        ("progress", progress)):
            if not isinstance(v, bool):
                raise TypeError(f"{name} must be True or False, got {v!r}")
        if not callable(clock):
            raise TypeError(f"clock must be a function returning seconds, such as time.perf_counter, got {clock!r}")
        read = _checked_clock(clock)
        budget = token_budget(max_batched_tokens, max_batch)
        cache = self.cache(cap, block_size)
        cache.clear()       # a run starts from an empty pool, whatever an earlier run (or its failure) left
        cap = cache.n_blocks * block_size
        pool = KVPool(cap, block_size, admission, reserve=reserve_max)
        ex = _Executor(self, reqs, cache, static, reserve_max, record_logits)
        sched = Scheduler(reqs, pool, static=static, max_batch=max_batch, preemption=preemption,
                          budget_tokens=budget, reject_oversized=reject_oversized, observer=ex, detail=True)
        ex.sched = sched
        config = dict(policy=policy, max_batch=max_batch, kv_capacity_tokens=cap, block_size=block_size,
                      admission=admission, preemption=preemption, max_batched_tokens=max_batched_tokens,
                      reserve_max=reserve_max, offline=offline, n_requests=len(reqs))
        bar = None
        if progress:
            from tqdm import tqdm
            bar = tqdm(total=sum(r.output_len for r in reqs), unit="tok", delay=2, file=sys.stderr,
                       desc=f"engine ({policy})", leave=False)
        steps = []
        try:
            t0 = last = read()
            while True:
                step = sched.next_step()
                if step is None:
                    if sched.finished:
                        break
                    if not skip_idle:
                        time.sleep(max(0.0, sched.next_arrival_s - sched.t))
                        now = read(last)
                        sched.wait_until(sched.t + (now - last))
                    sched.wait_until(sched.next_arrival_s)
                    last = read(last)
                    continue
                produced = ex.run_step(step)
                now = read(last)
                sched.end_step(now - last)
                last = now
                steps.append(step)
                ex.check_blocks()
                if bar is not None:
                    bar.update(produced)
        finally:
            if bar is not None:
                bar.close()
        wall = read(t0) - t0
        return EngineRun(result(sched, policy), steps, [s.tokens[r.prompt_len:] for s, r in zip(ex.seqs, reqs)],
                         ex.logits, ex.oom_errors, config, self.device, wall)


def _checked_clock(clock):
    """``clock`` read through checks: each reading a finite number of seconds, never earlier
    than the reading before (a NaN would make every figure NaN, a step back a negative step)."""
    def read(since: float = -math.inf) -> float:
        t = clock()
        if type(t) is not float:
            if isinstance(t, bool) or not isinstance(t, Real):
                raise TypeError(f"clock must return seconds as a number, got {type(t).__name__} {t!r}"[:300])
            t = float(t)
        if not math.isfinite(t):
            raise ValueError(f"clock must return a finite number of seconds, got {t!r}")
        if t < since:
            raise ValueError(f"clock went back from {since!r} to {t!r} s: give a monotonic clock, "
                             "such as time.perf_counter")
        return t
    return read


class _Executor:
    """One run's physical state: sequences, block tables, the rows of each step.

    It is the scheduler's observer: told of each admission, release, decode start and stop
    and out-of-memory kill, it allocates and frees blocks exactly as the scheduler counts them.
    """

    def __init__(self, engine, reqs, cache, static, reserve_max, record_logits):
        self.engine, self.reqs, self.cache, self.static, self.reserve = engine, reqs, cache, static, reserve_max
        self.decoder = PagedDecoder(engine.model, cache)
        self.dev = engine.device.kind
        self.dec, self.pad = {}, {}      # ordered sets of request indices: decoding, static padding rows
        self.logits = [[] for _ in reqs] if record_logits else None
        self.oom_errors = []
        self.sched = None
        self.seqs = [_Seq(engine.prompt_tokens(i, r)) for i, r in enumerate(reqs)]

    # -- observer ---------------------------------------------------------------------------
    def admitted(self, i, ctx):
        seq, bs = self.seqs[i], self.cache.block_size
        assert len(seq.tokens) == ctx, "engine and scheduler disagree on a sequence's length"
        shared = self.sched.shared[i]
        table = self.cache.share_prefix((self.sched.pfx[i], shared), shared // bs) if shared else []
        own = self.sched.own_final[i] if self.reserve else ctx + 1 - shared
        try:
            table += self.cache.allocate(-(-own // bs))
        except OutOfBlocks:
            self.cache.free(table)
            raise
        seq.table, seq.done = table, 0

    def decoding(self, i):
        self.dec[i] = None

    def stopped(self, i):
        del self.dec[i]
        if self.static:
            self.pad[i] = None

    def released(self, i):
        seq = self.seqs[i]
        self.pad.pop(i, None)
        self.cache.free(seq.table)
        seq.table = []

    def killed(self, victims):
        # The growth that did not fit, asked of the real pool, fails there too: record its error.
        bs = self.cache.block_size
        need = sum(1 for j in self.dec if len(self.seqs[j].tokens) % bs == 0)
        try:
            got = self.cache.allocate(need)
            self.cache.free(got)
        except OutOfBlocks as err:
            self.oom_errors.append(str(err))
        for j in victims:
            self.cache.free(self.seqs[j].table)
            self.seqs[j].table = []
        self.dec.clear()
        self.pad.clear()

    # -- one step ---------------------------------------------------------------------------
    def run_step(self, step) -> int:
        """Build the step's batch, run it, append the sampled tokens; return tokens produced."""
        cache, bs, seqs = self.cache, self.cache.block_size, self.seqs
        if not self.reserve:
            for i in self.dec:                       # growth: a full last block needs a successor
                seq = seqs[i]
                if len(seq.tokens) % bs == 0:
                    seq.table += cache.allocate(1)
        single = list(self.dec) + list(self.pad)
        ids, slots, lens = [], [], []
        for i in single:
            seq = seqs[i]
            n = len(seq.tokens)
            ids.append(seq.tokens[-1])
            slots.append(seq.table[(n - 1) // bs] * bs + (n - 1) % bs)
            lens.append(n)
        tables = None
        if single:
            width = -(-max(lens) // bs)
            tables = [seqs[i].table[:width] + [0] * (width - min(width, len(seqs[i].table))) for i in single]
        chunks, logit_rows, completing = [], list(range(len(self.dec))), []
        row = len(single)
        for i, start, c in step.chunks:
            seq = seqs[i]
            assert start == seq.done, "engine and scheduler disagree on a prefill's progress"
            ids += seq.tokens[start:start + c]
            slots += cache.slots(seq.table, start, start + c)
            chunks.append((row, c, start, seq.table[:-(-(start + c) // bs)]))
            seq.done += c
            row += c
            if seq.done == len(seq.tokens):
                logit_rows.append(row - 1)
                completing.append(i)
        dev, long = self.dev, torch.long
        batch = Batch(
            ids=torch.tensor(ids, dtype=long, device=dev), slots=torch.tensor(slots, dtype=long, device=dev),
            n_single=len(single),
            single_tables=torch.tensor(tables, dtype=long, device=dev) if single else None,
            single_lens=torch.tensor(lens, dtype=long, device=dev) if single else None,
            chunks=[(r, c, s, torch.tensor(t, dtype=long, device=dev)) for r, c, s, t in chunks],
            logit_rows=torch.tensor(logit_rows, dtype=long, device=dev),
            single_max_len=max(lens, default=0), single_uniform=min(lens, default=0) == max(lens, default=0))
        logits = self.decoder.forward(batch)
        nxt = logits.argmax(-1).tolist()              # waits for the device: the step is done
        owners = list(self.dec) + completing
        for k, i in enumerate(owners):
            seqs[i].tokens.append(nxt[k])
            if self.logits is not None:
                self.logits[i].append(logits[k].float().cpu())
        return len(owners)

    def check_blocks(self):
        """The pool holds exactly the blocks the scheduler's accounting counts."""
        if self.cache.n_used != self.sched.pool.alloc:
            raise RuntimeError(f"block accounting diverged: the pool holds {self.cache.n_used} blocks, "
                               f"the scheduler counts {self.sched.pool.alloc}")
