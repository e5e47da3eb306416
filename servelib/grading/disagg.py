"""Exercises of the chapter "Disaggregated prefill and decode" (notebooks/10_disaggregated.ipynb).

Each reference takes the exercise's constants as keyword arguments, the book's values as
defaults, and computes the answer with :mod:`servelib.disagg` and :mod:`servelib.queueing`.
"""
import math

from ..disagg import (SLO, Workload, chunked_prefill, kv_transfer_bytes, mixed_step_time_s, prefill_slack_tokens,
                      size_disaggregated, transfer_time_s, usd_per_million_tokens)
from ..models import get_model
from ..queueing import md1_max_utilization
from ..sim import PoolSpec, Request, simulate_disaggregated
from .registry import exercise


@exercise("dis-1", rtol=0.01, unit="x")
def _prompt_stretches_the_step(model="llama-3-70b", gpu="h100-sxm", tp_degree=4, decode_batch=128,
                               context_len=4096, prompt_len=1024):
    m = get_model(model)
    kw = dict(decode_batch=decode_batch, context_len=context_len, tp_degree=tp_degree)
    return (mixed_step_time_s(m, gpu, prefill_tokens=prompt_len, **kw)
            / mixed_step_time_s(m, gpu, prefill_tokens=0, **kw))


@exercise("dis-2", rtol=0.01, unit="tokens")
def _free_prompt_tokens(model="llama-3-70b", gpu="h100-sxm", tp_degree=4, decode_batch=128, context_len=4096):
    return prefill_slack_tokens(get_model(model), gpu, decode_batch=decode_batch, context_len=context_len,
                                tp_degree=tp_degree)


@exercise("dis-3", rtol=0.01, unit="ms")
def _kv_transfer_ms(model="llama-3-8b", prompt_len=4096, tp_degree=2, link_GBps=25, latency_us=20):
    kv = kv_transfer_bytes(get_model(model), prompt_len, tp_degree=tp_degree)
    return transfer_time_s(kv, link_GBps * 1e9, latency_us * 1e-6) * 1e3


@exercise("dis-4", rtol=0.01, unit="ms")
def _chunked_prefill_ttft_ms(model="llama-3-70b", gpu="h100-sxm", tp_degree=8, decode_batch=32,
                             context_len=4096, prompt_len=4096, max_batched_tokens=1024):
    return chunked_prefill(get_model(model), gpu, prompt_len=prompt_len, decode_batch=decode_batch,
                           context_len=context_len, max_batched_tokens=max_batched_tokens,
                           tp_degree=tp_degree).ttft_s * 1e3


@exercise("dis-5", rtol=0, unit="instances")
def _prefill_instances_for_mean_ttft(prefill_ms=80, rate_per_s=30, ttft_target_ms=200):
    service = prefill_ms / 1e3
    rho = md1_max_utilization(service, (ttft_target_ms - prefill_ms) / 1e3)
    return math.ceil(rate_per_s * service / rho)


@exercise("dis-6", rtol=0.01, unit="$ per 1M tokens")
def _split_pools_cost(model="llama-3-70b", gpu="h100-sxm", rate_per_s=32, prompt_len=2048, output_len=256,
                      ttft_s=0.3, tpot_s=0.015, prefill_tp=8, decode_tp=4, link_GBps=50, latency_us=100,
                      usd_per_gpu_hour=2.5):
    wl = Workload(rate_per_s, prompt_len, output_len)
    split = size_disaggregated(get_model(model), gpu, wl, SLO(ttft_s, tpot_s), prefill_tp=prefill_tp,
                               decode_tp=decode_tp, link_Bps=link_GBps * 1e9, link_latency_s=latency_us * 1e-6)
    return usd_per_million_tokens(split.n_gpus, wl, usd_per_gpu_hour)


@exercise("dis-7", rtol=1e-3, unit="ms",
          vary={"prefill_ms": (30, 40, 50, 60), "step_ms": (10, 12, 15), "transfer_ms": (2, 4, 6),
                "output_len": (8, 10, 12)},
          text="**dis-7.** Separate pools: two prefill instances each take one prompt at a time, "
               "{prefill_ms} ms a prompt; one decode instance has two slots and {step_ms} ms steps; moving "
               "a prompt's KV between them takes {transfer_ms} ms. Four requests arrive at t = 0, each "
               "answering {output_len} tokens (the first from the prefill), and are dealt to the prefill "
               "instances in turn. When does the last one finish (ms)? Work out the timeline, then check "
               "it with `simulate_disaggregated`.")
def _two_pool_timeline_ms(prefill_ms=40, step_ms=12, transfer_ms=4, output_len=10):
    reqs = [Request(0.0, 100, output_len) for _ in range(4)]
    run = simulate_disaggregated(reqs, prefill=PoolSpec(2, prefill_ms / 1e3, 1),
                                 decode=PoolSpec(1, step_ms / 1e3, 2), transfer_s=transfer_ms / 1e3)
    return float(run.latency_s.max()) * 1e3
