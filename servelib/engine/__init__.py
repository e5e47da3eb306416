"""A real serving engine over the toy decoder: paged KV, continuous batching, measured.

:class:`Engine` serves :class:`servelib.sim.Request` lists with the scheduler the simulator
uses (:class:`servelib.sim.Scheduler`), running real forward passes of a random-weight GQA
decoder (:class:`servelib.measure.ToyDecoder`'s weights) over a paged KV cache
(:class:`PagedKVCache`: one preallocated tensor of blocks, block tables, reference-counted
prefix blocks) and reading the clock. ``python -m servelib.engine`` runs a workload from the
command line. Introduced in the chapter "A serving engine you can read".
"""
from . import workloads
from .cache import OutOfBlocks, PagedKVCache
from .calibrate import (COMPARED, Calibration, Overhead, calibrate, capacity_rps, compare, predict, step_overhead,
                        warmup_runs)
from .engine import Engine, EngineRun
from .model import Batch, PagedDecoder, engine_spec

__all__ = ["Engine", "EngineRun", "PagedKVCache", "OutOfBlocks", "PagedDecoder", "Batch", "engine_spec",
           "Calibration", "calibrate", "predict", "warmup_runs", "compare", "capacity_rps", "COMPARED",
           "Overhead", "step_overhead",
           "workloads"]
