"""The KV cache against the formula: the memory a real decode run's cache took, measured.

Not the size of a tensor shaped by the formula (that would only check the formula against
itself) but what the process, or the CUDA allocator, gained while a decode run filled its
cache: a count kept by the operating system or by torch, independent of servelib.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from .. import _check
from ..memory import kv_bytes_per_token
from ..models import ModelSpec
from .device import DeviceInfo, pick_device


@dataclass(frozen=True)
class KVMeasurement:
    """Memory a real decode run with a KV cache gained, against the formula.

    ``formula_bytes``: :func:`servelib.memory.kv_bytes_per_token` of ``model`` (the spec's
    name) x ``batch`` x ``context_len``, in the run's dtype. ``measured_bytes``: what the
    run added to memory while its cache was alive, read as ``method`` says: on CUDA the
    rise in ``torch.cuda.memory_allocated`` (the caching allocator's count of live tensor
    bytes), on Apple MPS in ``torch.mps.current_allocated_memory``; on a CPU the rise in
    this process's resident memory (the operating system's count of pages the process has
    touched, ``VmRSS`` on Linux). ``driver_bytes``: on
    CUDA, the fall in free device memory (``torch.cuda.mem_get_info``, which includes the
    allocator's rounding and reserve), else None. ``ratio``: measured over formula.
    """

    device: str
    dtype: str
    model: str
    batch: int
    context_len: int
    formula_bytes: float
    measured_bytes: int
    method: str
    driver_bytes: int | None

    @property
    def ratio(self) -> float:
        """``measured_bytes / formula_bytes``."""
        return self.measured_bytes / self.formula_bytes


def kv_toy_spec() -> ModelSpec:
    """The toy decoder :func:`measure_kv_cache` runs: Llama-3-8B's family scaled down so the cache dominates.

    4 layers of 8 heads of 128, every head with its own K and V (MHA, to make much cache for
    little arithmetic), hidden 1,024, MLP 256, vocabulary 512: about 20 million parameters
    and 16 KiB of 16-bit KV per token, so that a few thousand tokens of cache outweigh the
    activations of the run by far and a CPU fills them in a second or two.
    """
    from ..models import get_model
    return get_model("llama-3-8b").scaled(n_layers=4, hidden_size=1024, n_heads=8, n_kv_heads=8,
                                          intermediate_size=256, vocab_size=512, name="toy llama (KV-heavy)")


def _resident_bytes() -> int:
    """This process's resident memory in bytes (Linux ``/proc/self/statm``; else the peak from getrusage)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource
        import sys
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def measure_kv_cache(batch: int = 8, context_len: int = 512, *, spec: ModelSpec | None = None,
                     device: DeviceInfo | None = None, n_decode: int = 8) -> KVMeasurement:
    """Run a real decode with a KV cache and measure the memory its cache took (a :class:`KVMeasurement`).

    A :class:`~servelib.measure.ToyDecoder` of ``spec`` (default :func:`kv_toy_spec`)
    prefills ``batch`` prompts of ``context_len - n_decode`` tokens, one sequence at a
    time, into one cache, then decodes ``n_decode`` tokens for the whole batch, so that
    every position of the cache has been written by the model. Memory is read before the
    cache exists and after the run (see :class:`KVMeasurement` for how); the same run made
    once before, on a cache freed before the count, brings the allocator, the thread pool
    and the kernels' buffers to their steady size, so that what remains is the cache. Keep
    the cache above a few tens of MiB: the C allocator serves smaller blocks from memory
    the process may already hold. On a CPU the cache's pages
    become resident only when the run writes them, so the count is of what the run used,
    not of what was reserved. Raises ValueError for sizes that are not positive or an
    ``n_decode`` that leaves no prompt; a device out of memory raises as torch does.
    """
    import gc

    from .toy import ToyDecoder
    batch = _check.positive_int("batch", batch)
    context_len = _check.positive_int("context_len", context_len)
    n_decode = _check.positive_int("n_decode", n_decode)
    if n_decode >= context_len:
        raise ValueError(f"n_decode ({n_decode}) must be smaller than context_len ({context_len})")
    spec = kv_toy_spec() if spec is None else _check.instance("spec", spec, ModelSpec)
    dev = device or pick_device()
    model = ToyDecoder(spec, dev)
    prompt = context_len - n_decode
    toks = model.tokens(batch, context_len)

    def run(cache, n_seqs, prompt_len):
        for i in range(n_seqs):                           # prefill one sequence at a time
            model.forward(toks[i:i + 1, :prompt_len], cache[:, :, i:i + 1], 0)
        for t in range(n_decode):                         # then decode the whole batch together
            model.forward(toks[:n_seqs, prompt_len + t:prompt_len + t + 1], cache, prompt_len + t)

    # The same run once first, on a cache freed before the count starts: it leaves behind
    # what a run keeps besides its cache (allocator arenas, kernels' scratch, the largest
    # temporaries), so that the counted run adds only its cache.
    warm = model.new_cache(batch, context_len)
    run(warm, batch, prompt)
    del warm
    gc.collect()
    if dev.kind == "cuda":
        torch.cuda.synchronize()
        before, free_before = torch.cuda.memory_allocated(), torch.cuda.mem_get_info()[0]
    elif dev.kind == "mps":
        torch.mps.synchronize()
        before = torch.mps.current_allocated_memory()
    else:
        before = _resident_bytes()
    cache = model.new_cache(batch, context_len)
    run(cache, batch, prompt)
    driver = None
    if dev.kind == "cuda":
        torch.cuda.synchronize()
        measured, driver = torch.cuda.memory_allocated() - before, free_before - torch.cuda.mem_get_info()[0]
        method = "torch.cuda.memory_allocated"
    elif dev.kind == "mps":
        torch.mps.synchronize()
        measured, method = torch.mps.current_allocated_memory() - before, "torch.mps.current_allocated_memory"
    else:
        measured, method = _resident_bytes() - before, "resident memory of this process"
    elem = cache.element_size()
    del cache
    return KVMeasurement(dev.kind, model.dtype, spec.name, batch, context_len,
                         kv_bytes_per_token(spec, elem) * batch * context_len, measured, method, driver)
