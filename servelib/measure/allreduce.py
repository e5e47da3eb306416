"""An all-reduce timed with torch.distributed, at the sizes a tensor-parallel decode step sends.

Each size is timed in ``world_size`` processes on this machine: NCCL between GPUs when
there are enough of them, else gloo between CPU processes (the only all-reduce a laptop or a
CI runner can do, and a slow one: it goes through shared memory and the kernel's loopback,
not NVLink). The figures say what an all-reduce costs *here*, and, fitted to the
alpha-beta model (:func:`servelib.interconnect.fit_allreduce`), how its latency and its
bandwidth split that cost.
"""
from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from .. import _check
from ..interconnect import ring_allreduce_factor
from .ceilings import torch_dtype


@dataclass(frozen=True)
class AllReduceTiming:
    """One message size, all-reduced by ``world_size`` processes.

    ``message_bytes``: the tensor each process holds (``elements * element size``).
    ``median_s``/``iqr_s``: seconds per all-reduce, median and interquartile range over
    ``n`` timed calls (each call starts after a barrier, and is timed by rank 0 from before
    the call to its completion, synchronised on CUDA). ``algbw_Bps``: ``message_bytes /
    median_s``; ``busbw_Bps``: that times ``2(n-1)/n``, the bytes each process actually sent
    per second (nccl-tests' "bus bandwidth"). ``backend``, ``device``, ``dtype``, ``torch``
    and ``threads`` (intra-op threads per process) say how it ran.
    """

    backend: str
    device: str
    world_size: int
    dtype: str
    message_bytes: int
    median_s: float
    iqr_s: float
    n: int
    algbw_Bps: float
    busbw_Bps: float
    torch: str
    threads: int

    def as_dict(self) -> dict:
        """A plain dict, for JSON."""
        return asdict(self)


def _worker(rank, world_size, backend, init_file, sizes, dtype, repeats, warmup, threads, out_file):
    torch.set_num_threads(threads)
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    try:
        cuda = backend == "nccl"
        if cuda:
            torch.cuda.set_device(rank)
        dev = f"cuda:{rank}" if cuda else "cpu"
        dt = torch_dtype(dtype)
        elem = torch.empty((), dtype=dt).element_size()
        rows = []
        for size in sizes:
            x = torch.ones(max(1, size // elem), dtype=dt, device=dev)
            for _ in range(warmup):
                dist.all_reduce(x)
            times = []
            for _ in range(repeats):
                dist.barrier()
                if cuda:
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                dist.all_reduce(x)
                if cuda:
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
            rows.append((x.numel() * elem, times))
        if rank == 0:
            with open(out_file, "w") as fh:
                json.dump(rows, fh)
    finally:
        dist.destroy_process_group()


def time_allreduce(sizes_bytes, *, world_size: int = 2, backend: str | None = None, dtype: str = "bf16",
                   repeats: int = 50, warmup: int = 5, threads: int = 1) -> list[AllReduceTiming]:
    """Time an all-reduce of each size in ``sizes_bytes`` across ``world_size`` processes.

    ``backend``: 'nccl' (one GPU per process; needs ``world_size`` CUDA devices) or 'gloo'
    (CPU tensors); by default NCCL when this machine has enough GPUs, else gloo.
    ``dtype``: the elements' type ('bf16', 'fp16' or 'fp32'; decode activations are 16-bit);
    a size is rounded down to whole elements. Each process runs ``warmup`` untimed calls
    per size, then ``repeats`` timed ones, each after a barrier, with ``threads`` intra-op
    threads (1 by default, so that two processes on a 2-core machine do not fight).
    Starting the processes takes a few seconds (each imports torch).

    Raises ValueError for an empty size list, a size below one element, ``world_size < 2``
    or a backend this machine lacks. The timings are wall-clock and depend on the machine's
    load: report them with the device line, never assert them.
    """
    sizes = [_check.positive_int("sizes_bytes", s) for s in sizes_bytes]
    if not sizes:
        raise ValueError("sizes_bytes must hold at least one message size")
    ws = _check.positive_int("world_size", world_size)
    if ws < 2:
        raise ValueError(f"world_size must be >= 2 for an all-reduce, got {ws}")
    _check.choice("dtype", dtype, ("bf16", "fp16", "fp32"))
    elem = torch.empty((), dtype=torch_dtype(dtype)).element_size()
    if min(sizes) < elem:
        raise ValueError(f"every size must hold at least one {dtype} element ({elem} bytes), got {min(sizes)}")
    n_gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if backend is None:
        backend = "nccl" if n_gpus >= ws and dist.is_nccl_available() else "gloo"
    _check.choice("backend", backend, ("nccl", "gloo"))
    if backend == "nccl" and (n_gpus < ws or not dist.is_nccl_available()):
        raise ValueError(f"backend 'nccl' needs {ws} CUDA devices with NCCL; this machine has {n_gpus}")
    if backend == "gloo" and not dist.is_gloo_available():
        raise ValueError("backend 'gloo' is not available in this torch build")
    repeats = _check.positive_int("repeats", repeats)
    warmup = _check.non_negative_int("warmup", warmup)
    threads = _check.positive_int("threads", threads)

    with tempfile.TemporaryDirectory() as tmp:
        # A file rendezvous (no TCP port to pick) and a file for rank 0's results; a failed
        # worker makes start_processes raise, with its traceback, instead of hanging.
        out_file = os.path.join(tmp, "timings.json")
        mp.start_processes(_worker, args=(ws, backend, os.path.join(tmp, "rendezvous"), sizes, dtype,
                                          repeats, warmup, threads, out_file),
                           nprocs=ws, join=True, start_method="spawn")
        with open(out_file) as fh:
            rows = json.load(fh)
    device = torch.cuda.get_device_name(0) if backend == "nccl" else "cpu"
    result = []
    for size, times in rows:
        med = statistics.median(times)
        q = statistics.quantiles(times, n=4) if len(times) > 1 else [med, med, med]
        result.append(AllReduceTiming(backend, device, ws, dtype, size, med, q[2] - q[0], len(times),
                                      size / med, size / med * ring_allreduce_factor(ws), torch.__version__,
                                      threads))
    return result
