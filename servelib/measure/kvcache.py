"""Allocate a real KV cache and compare its bytes with the formula."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import _check
from ..memory import kv_bytes_per_token
from ..models import ModelSpec
from .device import DeviceInfo, pick_device


@dataclass(frozen=True)
class KVAllocation:
    """A KV cache allocated with torch, and the bytes three ways.

    ``shape``: the cache tensor's shape, ``(n_layers, 2, batch, n_kv_heads, context_len, head_dim)``.
    ``tensor_bytes``: ``numel * element_size`` of that tensor.
    ``formula_bytes``: :func:`servelib.memory.kv_bytes_per_token` x tokens.
    ``allocator_bytes``: the rise in ``torch.cuda.memory_allocated`` on CUDA, else None.
    """

    device: str
    dtype: str
    shape: tuple
    tensor_bytes: int
    formula_bytes: float
    allocator_bytes: int | None


def allocate_kv_cache(model: ModelSpec, batch: int, context_len: int,
                      device: DeviceInfo | None = None) -> KVAllocation:
    """Allocate the KV cache of ``batch`` sequences of ``context_len`` tokens, then free it.

    One tensor holds K and V for every layer, laid out as inference engines do
    (layer, K/V, sequence, KV head, position, head_dim), in the device's 16-bit dtype
    (fp16 on a CPU, where no arithmetic is done on it). Raises ValueError for non-positive
    sizes; a CUDA out-of-memory propagates as ``torch.cuda.OutOfMemoryError``.
    """
    _check.instance("model", model, ModelSpec)
    batch = _check.positive_int("batch", batch)
    context_len = _check.positive_int("context_len", context_len)
    dev = device or pick_device()
    dtype = torch.float16 if dev.kind == "cpu" else dev.torch_dtype
    shape = (model.n_layers, 2, batch, model.n_kv_heads, context_len, model.head_dim)
    before = torch.cuda.memory_allocated() if dev.kind == "cuda" else None
    cache = torch.empty(shape, dtype=dtype, device=dev.kind)
    allocated = torch.cuda.memory_allocated() - before if dev.kind == "cuda" else None
    tensor_bytes = cache.numel() * cache.element_size()
    del cache
    elem = torch.empty((), dtype=dtype).element_size()
    return KVAllocation(dev.kind, str(dtype).removeprefix("torch."), shape, tensor_bytes,
                        kv_bytes_per_token(model, elem) * batch * context_len, allocated)
