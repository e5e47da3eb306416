"""KV memory of one replica: contiguous reservations or a paged block manager.

Memory is counted in *units*: one token for a contiguous cache, one block of
``block_size`` tokens for a paged cache (vLLM's PagedAttention, Kwon et al. 2023).

* Contiguous, final admission: each sequence reserves ``prompt + max_output`` tokens when
  it is admitted; the reservation is what it holds until it leaves (the "max-length
  reservation" whose waste the vLLM paper measured).
* Contiguous, prompt admission: each sequence holds exactly its tokens, and grows by one
  token per decode step.
* Paged: each sequence holds ``ceil(own tokens / block_size)`` blocks, a new block taken
  on demand when its last one is full; with final admission the scheduler still *commits*
  the blocks of the final length, with prompt admission it commits only what is allocated
  (over-commit). The full blocks of a shared prefix are held once, reference-counted.
* Paged with ``reserve=True`` (final admission): each sequence takes the blocks of its
  final length when admitted, as a contiguous cache reserves its slab; the engine uses it
  to measure what that reservation holds.

The growth of all decoding sequences in a step is found in O(1): a sequence that held
``o`` own tokens at the end of step ``s0`` needs a new unit at step ``s`` exactly when
``(o + s - s0 - 1) % unit == 0``, so sequences are counted by the phase
``(o - s0 - 1) % unit`` and step ``s`` needs ``count[(-s) % unit]`` new units.
"""
from __future__ import annotations

import math

from .. import _check


#: Largest block the simulator accepts, in tokens. Engines use 8 to 256 (vLLM's default
#: is 16); the bound keeps a mistyped size from allocating per-phase counters by the billion.
MAX_BLOCK_SIZE = 65_536


class KVPool:
    """The KV budget of a replica, in units (tokens, or blocks when paged).

    ``capacity_tokens``: the budget in tokens (None: unlimited); paged pools hold
    ``capacity_tokens // block_size`` blocks. ``block_size``: tokens per block (None:
    contiguous). ``admission``: ``"final"`` or ``"prompt"`` (see the module docstring).
    ``reserve``: allocate the final length at admission (default: only for a contiguous
    cache with final admission; True needs final admission). Mutable bookkeeping for
    :class:`servelib.sim.scheduler.Scheduler`, whose executors read ``alloc`` (units held),
    ``used_tokens`` and ``unit``.
    """

    def __init__(self, capacity_tokens, block_size, admission, reserve=None):
        self.paged = block_size is not None
        self.unit = _check.positive_int("block_size", block_size) if self.paged else 1
        if self.unit > MAX_BLOCK_SIZE:
            raise ValueError(f"block_size must be at most {MAX_BLOCK_SIZE:,} tokens, got {block_size!r}")
        if capacity_tokens is None:
            self.cap = math.inf
            self.capacity_tokens = math.inf
        else:
            cap_tok = _check.positive_int("kv_capacity_tokens", capacity_tokens)
            if self.unit > cap_tok:
                raise ValueError(f"block_size ({self.unit}) must not exceed kv_capacity_tokens ({cap_tok}): "
                                 "the cache would hold no block")
            self.cap = cap_tok // self.unit
            self.capacity_tokens = cap_tok
        self.final = admission == "final"
        # Reservations of the final length never grow; every other mode allocates on demand.
        self.reserve = (self.final and not self.paged) if reserve is None else bool(reserve)
        if self.reserve and not self.final:
            raise ValueError("reserve=True reserves the final length: it needs admission='final'")
        self.grows = not self.reserve
        self.peak_alloc = self.peak_used = 0   # over the whole run, kills included
        self.reset()

    def reset(self):
        """Free everything (an out-of-memory kill of the whole batch)."""
        self.alloc = 0          # units held
        self.commit = 0         # units promised (final admission)
        self.pending = 0        # units the current step's growth needs
        self.used_tokens = 0    # tokens of KV actually stored
        self.refs = {}          # prefix code -> sequences holding it
        self.count = [0] * self.unit   # decoding sequences by block-boundary phase

    def units(self, tokens):
        """Units (tokens, or whole blocks when paged) that ``tokens`` tokens occupy, rounded up."""
        return -(-tokens // self.unit)

    @property
    def allocated_tokens(self):
        """Memory held, in tokens (whole blocks when paged)."""
        return self.alloc * self.unit

    def shared_tokens(self, prefix_len):
        """Tokens of a shared prefix that live in shared blocks (its full blocks; 0 if contiguous)."""
        return (prefix_len // self.unit) * self.unit if self.paged else 0

    def ever_fits(self, own_final, shared):
        """Whether a sequence of final length ``own_final + shared`` fits an empty pool."""
        return self.units(own_final) + shared // self.unit <= self.cap

    def _prefix_need(self, shared, pfx):
        return shared // self.unit if shared and self.refs.get(pfx, 0) == 0 else 0

    def _hold_prefix(self, shared, pfx, need):
        if shared:
            self.refs[pfx] = self.refs.get(pfx, 0) + 1
            if need:
                self.used_tokens += shared

    def try_admit(self, own_ctx, own_final, shared, pfx):
        """Admit a sequence that will prefill ``own_ctx`` tokens and produce one: True if it fits."""
        p = self._prefix_need(shared, pfx)
        if self.final:
            c = self.units(own_final) + p
            if self.commit + c > self.cap:
                return False
            self.commit += c
            a = c if not self.grows else self.units(own_ctx + 1) + p
        else:
            a = self.units(own_ctx + 1) + p
            if self.alloc + self.pending + a > self.cap:
                return False
        self.alloc += a
        self.used_tokens += own_ctx + 1
        self._hold_prefix(shared, pfx, p)
        return True

    def try_swap_in(self, own_ctx, shared, pfx):
        """Bring back a swapped sequence of ``own_ctx`` own tokens that decodes in this step."""
        p = self._prefix_need(shared, pfx)
        a = self.units(own_ctx) + p
        extra = 1 if own_ctx % self.unit == 0 else 0
        if self.alloc + self.pending + a + extra > self.cap:
            return False
        self.alloc += a
        self.pending += extra
        self.used_tokens += own_ctx
        self._hold_prefix(shared, pfx, p)
        return True

    def try_admit_prefilled(self, own_ctx, own_final, shared, pfx):
        """Admit a sequence that arrives holding ``own_ctx`` own tokens of KV made elsewhere
        (a prefill instance's) and decodes in this step: it takes the units of those tokens,
        plus the one its next token opens when its last unit is full (this step's growth was
        reserved before it came). Final admission commits its final length first."""
        p = self._prefix_need(shared, pfx)
        a = self.units(own_ctx) + p
        extra = 1 if self.grows and own_ctx % self.unit == 0 else 0
        if self.final:
            c = self.units(own_final) + p
            if self.commit + c > self.cap:
                return False
            self.commit += c
            if self.reserve:
                a = c
        elif self.alloc + self.pending + a + extra > self.cap:
            return False
        self.alloc += a
        self.pending += extra
        self.used_tokens += own_ctx
        self._hold_prefix(shared, pfx, p)
        return True

    def free(self, own_now, own_final, shared, pfx):
        """Release a sequence holding ``own_now`` own tokens (final length ``own_final``)."""
        if self.reserve:
            self.alloc -= self.units(own_final)
            self.commit -= self.units(own_final)
        else:
            self.alloc -= self.units(own_now)
            if self.final:
                self.commit -= self.units(own_final)
        self.used_tokens -= own_now
        if shared:
            self.refs[pfx] -= 1
            if self.refs[pfx] == 0:
                del self.refs[pfx]
                self.alloc -= shared // self.unit
                if self.final:
                    self.commit -= shared // self.unit
                self.used_tokens -= shared

    def enter_decode(self, own_tokens, step):
        """A sequence holding ``own_tokens`` at the end of ``step`` decodes from ``step + 1``."""
        k = (own_tokens - step - 1) % self.unit
        self.count[k] += 1
        return k

    def leave_decode(self, k):
        """A decoding sequence whose block-boundary phase is ``k`` stops growing."""
        self.count[k] -= 1

    def reserve_growth(self, step):
        """Units that decoding sequences need at ``step``; True if they fit."""
        self.pending = self.count[(-step) % self.unit] if self.grows else 0
        return self.alloc + self.pending <= self.cap

    def end_step(self, n_decoded):
        """Commit the step's growth: the blocks reserved for it and ``n_decoded`` new tokens."""
        self.alloc += self.pending
        self.pending = 0
        self.used_tokens += n_decoded
        self.peak_alloc = max(self.peak_alloc, self.alloc)
        self.peak_used = max(self.peak_used, self.used_tokens)
