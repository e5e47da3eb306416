"""Exercises of the chapter "Scheduling: continuous batching, admission control and paged KV"
(notebooks/05_scheduling.ipynb). Every reference is a run of :func:`servelib.sim.simulate`."""
from ..sim import Request, simulate, workloads
from .registry import exercise


@exercise("sch-1", rtol=1e-9, unit="s")
def _continuous_makespan_by_hand():
    reqs = [Request(0, 16, o) for o in (4, 1, 1, 2)]
    return simulate(reqs, max_batch=2, step_time_s=0.05).makespan_s


@exercise("sch-2", rtol=0.01, unit="x")
def _static_over_continuous_seed_3():
    kw = workloads.uneven_outputs(seed=3)
    return simulate(policy="static", **kw).makespan_s / simulate(policy="continuous", **kw).makespan_s


@exercise("sch-3", rtol=0, unit="sequences")
def _final_admission_concurrency():
    reqs = [Request(0, 512, 256, max_output_len=1536) for _ in range(64)]
    return int(simulate(reqs, max_batch=64, kv_capacity_tokens=32_768, step_time_s=0.02).trace.batch.max())


@exercise("sch-4", rtol=0, unit="tokens")
def _oom_tokens_thrown_away():
    reqs = [Request(0, 100, 50) for _ in range(4)]
    return simulate(reqs, max_batch=4, kv_capacity_tokens=560, admission="prompt",
                    step_time_s=0.02).oom_tokens_lost


@exercise("sch-5", rtol=0, unit="tokens")
def _paged_internal_fragmentation():
    r = simulate([Request(0, 999, 1)], max_batch=1, block_size=16, step_time_s=0.02)
    return r.kv_peak_tokens - r.kv_peak_used_tokens


@exercise("sch-6", rtol=1e-9, unit="s")
def _chunked_prefill_ttft():
    reqs = [Request(0, 1, 20), Request(0, 1000, 5)]
    r = simulate(reqs, max_batch=2, max_batched_tokens=256, step_time_s=0.02)
    return float(r.ttft_s[1])
