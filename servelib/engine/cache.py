"""A paged KV cache: one preallocated tensor of blocks, block tables, reference counts.

The cache is a single tensor ``(n_layers, 2, n_blocks, block_size, n_kv_heads, head_dim)``
allocated once, as vLLM allocates its KV cache at start-up (Kwon et al. 2023). A sequence
owns a *block table*, the list of block ids that hold its tokens in order: token ``p`` lives
in block ``table[p // block_size]`` at offset ``p % block_size``. Blocks come from a free
list when a sequence needs one and go back when its last user frees it. A block can be
used by several sequences (the full blocks of a shared prompt prefix): each block counts
its users, and only a count falling to zero returns it to the free list.
"""
from __future__ import annotations

import torch

from .. import _check
from ..measure.ceilings import torch_dtype


class OutOfBlocks(RuntimeError):
    """The pool has fewer free blocks than asked for (the engine's out-of-memory)."""


class PagedKVCache:
    """The KV blocks of one replica for a model of shape ``spec``.

    ``n_blocks``: blocks in the pool (>= 1). ``block_size``: tokens per block (>= 1).
    ``device``: a torch device name (``"cpu"``, ``"cuda"``, ``"mps"``); ``dtype``: ``"bf16"``,
    ``"fp16"`` or ``"fp32"``. ``kv`` is the tensor; :meth:`layer` gives one layer's K and V
    as ``(n_blocks * block_size, n_kv_heads, head_dim)`` views, one row per token slot.
    Raises ValueError for non-positive sizes; a device allocation failure propagates.
    """

    def __init__(self, spec, n_blocks: int, block_size: int, device: str, dtype: str):
        self.n_blocks = _check.positive_int("n_blocks", n_blocks)
        self.block_size = _check.positive_int("block_size", block_size)
        self.spec = spec
        self.kv = torch.zeros((spec.n_layers, 2, self.n_blocks, self.block_size, spec.n_kv_heads, spec.head_dim),
                              dtype=torch_dtype(dtype), device=device)
        self.clear()
        shape = (self.n_blocks * self.block_size, spec.n_kv_heads, spec.head_dim)
        self._layers = [(self.kv[i, 0].view(shape), self.kv[i, 1].view(shape)) for i in range(spec.n_layers)]

    def clear(self) -> None:
        """Every block free, no prefix shared: the pool as a run starts. (The tensor keeps its
        values: a step reads only slots its run has written, or masks them.)"""
        self.refs = [0] * self.n_blocks
        self.free_list = list(range(self.n_blocks - 1, -1, -1))   # a stack: pop() takes block 0 first
        self.prefixes = {}        # prefix key -> its shared block ids, while any user holds them

    @property
    def bytes_per_block(self) -> int:
        """Bytes one block holds across all layers, K and V."""
        return self.kv[:, :, 0].numel() * self.kv.element_size()

    @property
    def n_free(self) -> int:
        """Blocks on the free list."""
        return len(self.free_list)

    @property
    def n_used(self) -> int:
        """Blocks held by at least one sequence."""
        return self.n_blocks - len(self.free_list)

    def layer(self, i: int):
        """Layer ``i``'s K and V, each ``(n_blocks * block_size, n_kv_heads, head_dim)`` (views)."""
        return self._layers[i]

    def allocate(self, n: int) -> list[int]:
        """Take ``n`` free blocks (each with one user); OutOfBlocks if fewer are free."""
        if n > len(self.free_list):
            raise OutOfBlocks(f"the KV pool needs {n} more blocks and has {len(self.free_list)} free "
                              f"of {self.n_blocks}")
        got = [self.free_list.pop() for _ in range(n)]
        for b in got:
            self.refs[b] = 1
        return got

    def share_prefix(self, key, n: int) -> list[int]:
        """The ``n`` blocks of the shared prefix ``key``: taken from the pool for its first user,
        the same blocks with one more user for every later one."""
        blocks = self.prefixes.get(key)
        if blocks is None:
            blocks = self.prefixes[key] = self.allocate(n)
        else:
            for b in blocks:
                self.refs[b] += 1
        return list(blocks)

    def free(self, blocks) -> None:
        """Drop one user of each block; blocks left with none return to the pool."""
        for b in blocks:
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self.free_list.append(b)
        if self.prefixes:
            for key in [k for k, bl in self.prefixes.items() if self.refs[bl[0]] == 0]:
                del self.prefixes[key]

    def slots(self, table, start: int, stop: int) -> list[int]:
        """Token slots (rows of :meth:`layer`) of positions ``start .. stop-1`` of a sequence."""
        bs = self.block_size
        return [table[p // bs] * bs + p % bs for p in range(start, stop)]
