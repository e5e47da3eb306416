"""The per-step decisions of one serving replica: retire, admit, preempt, chunk.

One scheduler, two executors. :func:`servelib.sim.simulate` drives a :class:`Scheduler`
with a modelled clock; :mod:`servelib.engine` drives the same class with real forward
passes over a paged KV cache and reads the clock. The scheduler never looks at a clock:
an executor asks it for the next step, runs that step however it likes, and reports how
long it took::

    while True:
        step = sched.next_step()          # arrivals, growth (preempt / kill), admission, chunks
        if step is None:                  # nothing in flight
            if sched.finished:
                break
            sched.wait_until(sched.next_arrival_s)
            continue
        sched.end_step(run(step))         # seconds: modelled, or measured

An executor that must hold real memory (the engine) passes an ``observer`` which is told
of every admission, release, decode start/stop and kill, in the order they happen.

Conventions (the chapter "Scheduling" derives them):

* A sequence that has generated ``g`` tokens holds ``prompt_len + g`` tokens of KV; its
  final length is ``prompt_len + output_len``, and what the scheduler can know in advance
  is ``prompt_len + max_output_len``.
* Memory is counted in units (tokens, or blocks when paged) by a
  :class:`~servelib.sim.blocks.KVPool`; one pool is one replica's cache, so a deployment
  of several pools (prefill and decode apart, say) runs one scheduler per pool.
* Cost is O(1) per step plus O(log n) per event (admission, completion, preemption), so
  the simulator runs 10,000 requests and millions of decode tokens in about a second.
"""
from __future__ import annotations

import heapq
import math
from collections import deque
from typing import NamedTuple

# Request states.
FUTURE, WAITING, PREFILL, DECODE, HELD, DONE, REJECTED, KILLED, STARVED = range(9)
STATUS_NAMES = ("future", "waiting", "prefill", "decode", "held", "completed", "rejected",
                "oom_killed", "starved")


# A float64 clock far from 0 cannot count a short step: 1e15 + 1e-9 == 1e15, and at 2**34 s
# a 1 ms step moves it 0.05% too little. A step that moves the clock by other than its
# duration (to one part in a million) would make every later time a quiet wrong number,
# so it is an error instead. (Rounding is at most 1.1e-16 of t: below t / step = 9e9 it
# never trips; that is 3 years of 10 ms steps.)
_CLOCK_RTOL = 1e-6


def _check_clock(before: float, after: float, dt: float) -> None:
    if abs((after - before) - dt) > _CLOCK_RTOL * dt:
        raise ValueError(
            f"the clock at t = {before:g} s cannot count a step of {dt:g} s in float64 (it moved "
            f"{after - before:g} s): arrival_s is too large for the step time (step_time_s); "
            "give arrivals in seconds from the start of the run")


class Step(NamedTuple):
    """One step the scheduler has planned, before it runs.

    ``batch``: sequences holding a slot (prefilling, decoding, and a static batch's finished
    members). ``decode``: sequences that decode one token. ``padded``: finished members of a
    static batch whose rows are still computed (padding). ``tokens``: tokens processed
    (decode + padding + prefill chunks). ``kv_tokens``: KV tokens stored at the start of the
    step. ``chunks``: the prefill work, ``(request index, first position, tokens)`` in
    first-come order; a chunk that reaches the end of its prompt yields a token.
    ``completing``: how many chunks do. ``swap_tokens``: KV tokens copied to or from host
    memory for this step. ``index``: the step's number (1, 2, ...).
    ``decode_context_tokens``: keys the decode and padding rows attend to, summed;
    ``max_context``: the most any of them attends to (computed only for a scheduler made
    with ``detail=True``, else 0).
    """

    index: int
    batch: int
    decode: int
    padded: int
    tokens: int
    kv_tokens: int
    chunks: tuple
    completing: int
    swap_tokens: int
    decode_context_tokens: int
    max_context: int = 0

    @property
    def logit_rows(self) -> int:
        """Rows whose next-token logits the step computes: one per decoding sequence and one
        per completed prefill (padding rows are discarded)."""
        return self.decode + self.completing


class Scheduler:
    """The decisions of one replica for a list of requests (see the module docstring).

    ``requests``: a list of :class:`servelib.sim.Request`. ``pool``: the replica's
    :class:`~servelib.sim.blocks.KVPool`. ``static``: static batching (a batch is formed
    when the replica is empty and runs until its longest member finishes) instead of
    continuous. ``max_batch``: most sequences in a batch. ``preemption``: None,
    ``"recompute"`` or ``"swap"``. ``budget_tokens``: most tokens per step (chunked
    prefill; ``math.inf`` for none). ``retire_before_admit``, ``reject_oversized``: as in
    :func:`servelib.sim.simulate`, which checks every argument; this class trusts them.
    ``observer``: None, or an object with methods ``admitted(i, ctx_tokens)``,
    ``decoding(i)``, ``stopped(i)``, ``released(i)`` and ``killed(indices)``. ``detail``:
    fill :attr:`Step.max_context` (O(batch) per step, for step-time models that need it).
    ``prefilled``: the replica is a decode instance of a disaggregated deployment
    (:func:`servelib.sim.simulate_disaggregated`): every request arrives holding its
    prompt's KV and its first token, made elsewhere, so admission starts it decoding in the
    step being planned and no step ever prefills; its first token counts at its arrival.
    Needs ``preemption=None`` (a recompute would prefill here) and every ``output_len``
    >= 2 (a one-token answer has nothing left to decode).

    Read by executors: ``t`` (the clock, s), ``s`` (steps run), ``trace`` (columns of
    :class:`servelib.sim.Trace` as lists). :meth:`result` builds the
    :class:`servelib.sim.SimResult`.
    """

    def __init__(self, requests, pool, *, static, max_batch, preemption, budget_tokens,
                 retire_before_admit=True, reject_oversized=True, observer=None, detail=False,
                 prefilled=False):
        self.reqs, self.pool, self.static, self.max_batch = requests, pool, static, max_batch
        self.detail, self.prefilled = detail, prefilled
        self.preemption, self.budget_tokens = preemption, budget_tokens
        self.rba, self.reject_oversized, self.obs = retire_before_admit, reject_oversized, observer
        reqs = requests
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
        self.nxt = 0              # index into order of the next arrival
        self.st = [FUTURE] * n
        self.g = [int(prefilled)] * n   # tokens generated (for a decoding request: base + step)
        self.base = [0] * n
        self.key = [0] * n        # block-boundary phase of a decoding request (KVPool)
        self.ep = [0] * n         # bumps whenever a request leaves the batch (lazy heap deletion)
        self.rem = [0] * n        # prefill tokens still to process
        self.swapped = [False] * n
        self.left_at = [-1] * n   # step at which a preempted request left the batch
        self.first_t = list(self.arr) if prefilled else [math.nan] * n
        self.last_t = [math.nan] * n
        self.done_t = [math.nan] * n
        self.rejections = []
        self.waiting = deque()
        self.prefilling = []      # FCFS
        self.fin = []             # heap (finish step, i, epoch) of decoding requests
        self.lifo = []            # heap (-admission seq, i, epoch): newest first, for preemption
        self.held = []            # finished, still holding slot and memory (static batch; late retire)
        self.n_dec = self.in_flight = self.adm_seq = 0
        # Context of decoding sequences: sum(prompt + base) + n_dec * s (O(1) per step).
        self.dec_ctx0 = self.held_ctx = 0
        self.t, self.s = 0.0, 0   # time, index of the last completed step
        self.oom_events = self.oom_killed = self.oom_lost = self.oom_90 = 0
        self.n_pre = self.recomputed = self.swapped_tok = self.pre_steps = 0
        self.step_swap = 0
        self.step = None          # the planned step, between next_step and end_step
        self.completing = ()
        self.trace = ([], [], [], [], [], [], [], [])

    # -- state changes -------------------------------------------------------------------
    def own_now(self, i):
        """KV tokens request i holds now that are its own (a shared prefix's blocks excluded)."""
        st = self.st[i]
        g = self.base[i] + self.s if st == DECODE else self.g[i] + (st == PREFILL)
        return self.prompt[i] + g - self.shared[i]

    def stop_decode(self, i):
        """Request i leaves the decoding set; its generated count is fixed at this step's."""
        self.g[i] = self.base[i] + self.s
        self.pool.leave_decode(self.key[i])
        self.n_dec -= 1
        self.dec_ctx0 -= self.prompt[i] + self.base[i]
        if self.obs:
            self.obs.stopped(i)

    def release(self, i):
        """Free the memory and the batch slot of request i (held, prefilling or decoding)."""
        own = self.own_now(i)
        if self.st[i] == DECODE:
            self.stop_decode(i)
        elif self.st[i] == HELD and self.static:
            self.held_ctx -= self.prompt[i] + self.g[i]
        self.pool.free(own, self.own_final[i], self.shared[i], self.pfx[i])
        self.ep[i] += 1
        self.in_flight -= 1
        if self.obs:
            self.obs.released(i)

    def start_decode(self, i):
        """Request i holds prompt + g tokens at the end of step s and decodes from step s + 1."""
        self.st[i] = DECODE
        self.base[i] = self.g[i] - self.s
        self.key[i] = self.pool.enter_decode(self.prompt[i] + self.g[i] - self.shared[i], self.s)
        self.n_dec += 1
        self.dec_ctx0 += self.prompt[i] + self.base[i]
        heapq.heappush(self.fin, (self.out[i] - self.base[i], i, self.ep[i]))
        if self.obs:
            self.obs.decoding(i)

    def finish(self, i):
        """Request i produced its last token in the step that just ended."""
        self.g[i] = self.out[i]
        self.st[i] = HELD
        self.last_t[i] = self.t
        if self.static or not self.rba:
            self.held.append(i)
            if self.static:
                self.held_ctx += self.prompt[i] + self.g[i]
        else:
            self.retire(i, self.t)

    def retire(self, i, t):
        """Request i completes at time ``t``: its memory and slot are freed."""
        self.release(i)
        self.st[i] = DONE
        self.done_t[i] = t

    def retire_held(self):
        """Retire every finished request still holding its slot."""
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
        elif self.prefilled:
            if not pool.try_admit_prefilled(own, self.own_final[i], self.shared[i], self.pfx[i]):
                return False
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
        if swap_in or self.prefilled:
            self.start_decode(i)
        else:
            self.st[i] = PREFILL
            self.rem[i] = ctx
            self.prefilling.append(i)
            if self.obs:
                self.obs.admitted(i, ctx)
        return True

    def in_batch(self):
        """Requests holding a batch slot (prefilling, decoding or finished but held)."""
        return [i for _, i, e in self.lifo if e == self.ep[i] and self.st[i] in (PREFILL, DECODE, HELD)]

    def kill_all(self):
        """Out of memory: every request in the batch dies and its tokens are thrown away."""
        self.oom_events += 1
        victims = self.in_batch()
        for i in victims:
            g = self.out[i] if self.st[i] == HELD else \
                self.base[i] + self.s if self.st[i] == DECODE else self.g[i]
            self.oom_killed += 1
            self.oom_lost += g
            self.oom_90 += g >= 0.9 * self.out[i]
            self.st[i] = KILLED
            self.ep[i] += 1
        self.pool.reset()
        self.prefilling.clear()
        self.fin.clear()
        self.lifo.clear()
        self.held.clear()
        self.n_dec = self.in_flight = self.dec_ctx0 = self.held_ctx = 0
        if self.obs:
            self.obs.killed(victims)

    def preempt_newest(self):
        """Evict the most recently admitted running request to the head of the queue."""
        while True:
            _, i, e = heapq.heappop(self.lifo)
            if e == self.ep[i] and self.st[i] in (PREFILL, DECODE):
                break
        was_prefill = self.st[i] == PREFILL
        if was_prefill:
            self.prefilling.remove(i)
            # The work done on this prefill is thrown away. A first prefill (nothing generated
            # yet) counts it now; a recompute prefill counted its whole context on admission,
            # so only the part it never reached comes off.
            if self.g[i]:
                self.recomputed -= self.rem[i]
            else:
                self.recomputed += self.prompt[i] - self.rem[i]
        self.release(i)
        self.n_pre += 1
        self.left_at[i] = self.s
        if self.preemption == "swap" and not was_prefill:
            own = self.prompt[i] + self.g[i] - self.shared[i]
            self.swapped[i] = True
            self.swapped_tok += own
            self.step_swap += own
        self.st[i] = WAITING
        self.waiting.appendleft(i)

    def max_context(self):
        """Most keys any decode (or static padding) row attends to in the coming step."""
        s, best = self.s, 0
        for _, i, e in self.fin:
            if e == self.ep[i] and self.st[i] == DECODE:
                best = max(best, self.prompt[i] + self.base[i] + s)
        if self.static:
            for i in self.held:
                best = max(best, self.prompt[i] + self.g[i])
        return best

    # -- the executor's interface ----------------------------------------------------------
    @property
    def next_arrival_s(self) -> float:
        """Arrival time of the next request not yet seen (``math.inf`` if none)."""
        return self.arr[self.order[self.nxt]] if self.nxt < self.n else math.inf

    @property
    def finished(self) -> bool:
        """True when every request has completed, been rejected, killed or starved."""
        return self.nxt >= self.n and self.in_flight == 0 and not self.waiting

    def wait_until(self, t: float) -> None:
        """Nothing is in flight: move the clock forward to ``t`` (never back)."""
        self.t = max(self.t, t)

    def arrive(self):
        """Arrivals up to now join the queue, or are rejected if they can never fit."""
        pool, arr, order, n = self.pool, self.arr, self.order, self.n
        while self.nxt < n and arr[order[self.nxt]] <= self.t:
            i = order[self.nxt]
            self.nxt += 1
            r = self.reqs[i]
            if self.reject_oversized and not pool.ever_fits(self.own_final[i], self.shared[i]):
                self.st[i] = REJECTED
                self.rejections.append((i, (
                    f"final length {r.final_len} tokens (prompt {r.prompt_len} + max output "
                    f"{r.max_output_len}) exceeds the KV capacity of {pool.capacity_tokens:g} tokens")))
            else:
                self.st[i] = WAITING
                self.waiting.append(i)

    def next_step(self) -> Step | None:
        """Decide the next step at time ``t``: arrivals, growth, admission, prefill chunks.

        Returns the :class:`Step` to run, or None when nothing is in flight (then the
        executor waits for :attr:`next_arrival_s`, or stops if :attr:`finished`).
        """
        pool, waiting = self.pool, self.waiting
        while True:
            self.arrive()
            self.step_swap = 0

            # Running sequences' growth comes first (vLLM's order, V0 and V1): if it does not
            # fit, preempt the newest sequence, or without preemption the whole batch dies.
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
                    cap -= self.rem[i] if self.st[i] == PREFILL else 1
                if not self.static and self.held:
                    # retire_before_admit=False: last step's finished sequences leave only now.
                    self.retire_held()
                    released = True

            if self.in_flight:
                break
            if released:
                continue
            if waiting:
                # The head of the queue cannot fit even into an empty replica: first come,
                # first served, it and everything behind it wait forever.
                for i in list(waiting) + self.order[self.nxt:]:
                    self.st[i] = STARVED
                waiting.clear()
                self.nxt = self.n
            return None

        # The step: prefill chunks in FCFS order within the token budget, one decode
        # token per decoding sequence (static batches also compute their finished rows).
        cap = self.budget_tokens - self.n_dec
        padded = len(self.held) if self.static else 0
        tokens = self.n_dec + padded
        chunks, completing = [], []
        for i in self.prefilling:
            if cap <= 0:
                break
            r = self.rem[i]
            c = min(r, cap)
            chunks.append((i, self.prompt[i] + self.g[i] - r, c))
            self.rem[i] = r - c
            cap -= c
            tokens += c
            if r == c:
                completing.append(i)
        self.completing = completing
        self.step = Step(self.s + 1, self.in_flight, self.n_dec, padded, tokens, pool.used_tokens,
                         tuple(chunks), len(completing), self.step_swap,
                         self.dec_ctx0 + self.n_dec * self.s + self.held_ctx,
                         self.max_context() if self.detail else 0)
        self._n_waiting = len(waiting)
        return self.step

    def end_step(self, dt: float) -> None:
        """The planned step took ``dt`` seconds: advance the clock, record it, and finish or
        start decoding the requests it completed. Raises ValueError if the clock, in float64,
        cannot move by ``dt`` (an arrival_s far too large for the step time)."""
        pool, step = self.pool, self.step
        t = self.t + dt
        _check_clock(self.t, t, dt)
        self.t = t
        self.s += 1
        n_decoded = self.n_dec
        pool.end_step(n_decoded)
        for col, v in zip(self.trace, (self.t, dt, step.batch, n_decoded, step.tokens, pool.used_tokens,
                                       pool.allocated_tokens, self._n_waiting)):
            col.append(v)

        # Decoding sequences that reached their output length finish.
        fin, s = self.fin, self.s
        while fin and fin[0][0] <= s:
            _, i, e = heapq.heappop(fin)
            if e == self.ep[i] and self.st[i] == DECODE:
                self.stop_decode(i)
                self.finish(i)
        # Completed prefills produced their first token (or, after recompute, the next).
        completing = self.completing
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
        self.step = None

    def can_coast(self) -> bool:
        """Whether the coming steps are pure decode steps with no event until one finishes
        (see :meth:`coast`)."""
        return bool(self.n_dec and not self.prefilling and (self.static or not (self.held or self.waiting)))

    def coast(self, dt: float) -> None:
        """Run, in one go, the coming decode steps of constant duration ``dt`` in which only
        token counts change.

        Steps with no arrival, completion, prefill or new block differ only in the tokens
        stored, which grow by ``n_dec`` a step: their trace rows are written directly. The
        result is exactly that of calling :meth:`next_step` and :meth:`end_step` one by one.
        """
        pool, s, n_dec = self.pool, self.s, self.n_dec
        limit = self.fin[0][0] - 1 - s
        if pool.grows:
            u = pool.unit
            for j in range(1, min(limit, u) + 1):
                if pool.count[(-(s + j)) % u]:
                    limit = j - 1
                    break
        next_arrival_s = self.next_arrival_s
        t, ends = self.t, []
        while len(ends) < limit and t < next_arrival_s:
            t += dt
            ends.append(t)
        k = len(ends)
        if not k:
            return
        _check_clock(ends[-2] if k > 1 else self.t, t, dt)     # the last step rounds the most
        used0 = pool.used_tokens
        pool.used_tokens += n_dec * k
        pool.peak_used = max(pool.peak_used, pool.used_tokens)
        self.t, self.s = t, s + k
        tokens = n_dec + (len(self.held) if self.static else 0)
        for col, v in zip(self.trace, (ends, [dt] * k, [self.in_flight] * k, [n_dec] * k, [tokens] * k,
                                       range(used0 + n_dec, pool.used_tokens + 1, n_dec),
                                       [pool.allocated_tokens] * k, [len(self.waiting)] * k)):
            col.extend(v)
