"""A scheduling simulator of one LLM serving replica.

``simulate(requests, ...)`` runs :class:`Request` objects through static or continuous
batching over a KV budget (contiguous or paged, with admission on the final or the prompt
length, preemption and chunked prefill) and returns a :class:`SimResult`. The decisions of
each step are made by :class:`Scheduler`, the same class the real engine
(:mod:`servelib.engine`) drives. :mod:`servelib.sim.workloads` makes seeded workloads;
:func:`roofline_step_time` turns a model and a GPU into the step-time function ``simulate``
takes, and :class:`StepTimeModel` (:func:`fit_step_time`) is one fitted to a real engine.
:func:`simulate_pool` runs several replicas, and :func:`simulate_disaggregated` separate
prefill and decode pools with a KV transfer between them (:mod:`servelib.sim.pools`).
Introduced in the chapter "Scheduling: continuous batching, admission control and paged KV";
held to a real engine in "A serving engine you can read"; pools in "Disaggregated prefill
and decode".
"""
from . import workloads
from .core import Request, SimResult, Trace, simulate
from .pools import (DeploymentResult, PoolSpec, PoolUsage, kv_transfer_time, roofline_pool, simulate_disaggregated,
                    simulate_pool, sized_pool)
from .scheduler import Scheduler, Step
from .steptime import STEP_TERMS, StepTimeModel, fit_step_time, roofline_step_time, swap_s_per_token

__all__ = ["Request", "SimResult", "Trace", "simulate", "roofline_step_time", "swap_s_per_token",
           "Scheduler", "Step", "StepTimeModel", "fit_step_time", "STEP_TERMS",
           "workloads", "PoolSpec", "PoolUsage", "DeploymentResult", "roofline_pool", "sized_pool",
           "kv_transfer_time", "simulate_pool", "simulate_disaggregated"]
