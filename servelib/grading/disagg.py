"""Exercises of the chapter "Disaggregated prefill and decode" (notebooks/10_disaggregated.ipynb).

Each reference takes the exercise's constants as keyword arguments, the book's values as
defaults, and computes the answer with :mod:`servelib.disagg` and :mod:`servelib.queueing`;
``vary`` and ``text`` declare the per-student variants (see
:mod:`servelib.grading.variants`). Step times are the chapter's roofline of a mixed step:
``2P`` FLOPs per token, the weights, the decoding sequences' KV and the prompt's KV writes.
"""
import math

from ..disagg import (SLO, Workload, chunked_prefill, kv_transfer_bytes, mixed_step_time_s, prefill_slack_tokens,
                      size_disaggregated, transfer_time_s, usd_per_million_tokens)
from ..models import get_model
from ..queueing import md1_max_utilization
from ..sim import PoolSpec, Request, simulate_disaggregated
from .registry import exercise

_WORDS = {4: "four", 8: "eight"}


def _node(tp_degree):
    """Llama-3-70B on ``tp_degree`` H100s, as a statement describes it for the roofline."""
    return (f"Llama-3-70B (70.55 billion parameters, bf16; 320 KiB of KV cache per token) on "
            f"{_WORDS[tp_degree]} H100 SXMs (TP={tp_degree}; 989.5 dense bf16 TFLOP/s and 3.35 TB/s each)")


def _dis1_text(tp_degree, decode_batch, context_len, prompt_len, **_):
    return (f"**dis-1.** {_node(tp_degree)}: {decode_batch} sequences decode at {context_len:,} tokens of "
            f"context when a {prompt_len:,}-token prompt is prefilled in the same step. How many times longer "
            f"is that step than the decode step alone (roofline, overlapped bound, $2P$ FLOPs per token)?")


@exercise("dis-1", rtol=1e-3, unit="x",
          vary={"tp_degree": (4, 8), "decode_batch": (32, 64, 128), "context_len": (2048, 4096),
                "prompt_len": (256, 512, 1024, 2048)}, text=_dis1_text)
def _prompt_stretches_the_step(model="llama-3-70b", gpu="h100-sxm", tp_degree=4, decode_batch=128,
                               context_len=4096, prompt_len=1024):
    m = get_model(model)
    kw = dict(decode_batch=decode_batch, context_len=context_len, tp_degree=tp_degree)
    return (mixed_step_time_s(m, gpu, prefill_tokens=prompt_len, **kw)
            / mixed_step_time_s(m, gpu, prefill_tokens=0, **kw))


def _dis2_text(tp_degree, decode_batch, context_len, **_):
    return (f"**dis-2.** {_node(tp_degree)}: {decode_batch} sequences decode at {context_len:,} tokens of "
            f"context. How many prompt tokens can that step carry beside them and still be memory-bound "
            f"(the prompt tokens' KV writes counted)?")


@exercise("dis-2", rtol=0.01, unit="tokens",
          vary={"tp_degree": (4, 8), "decode_batch": (16, 32, 64, 128), "context_len": (1024, 2048, 4096)},
          text=_dis2_text)
def _free_prompt_tokens(model="llama-3-70b", gpu="h100-sxm", tp_degree=4, decode_batch=128, context_len=4096):
    return prefill_slack_tokens(get_model(model), gpu, decode_batch=decode_batch, context_len=context_len,
                                tp_degree=tp_degree)


def _dis3_text(model, prompt_len, tp_degree, link_GBps, **_):
    return (f"**dis-3.** {model} ({model.n_layers} layers, {model.n_kv_heads} KV heads of `head_dim` "
            f"{model.head_dim}; fp16 KV cache) prefills a {prompt_len:,}-token prompt at TP={tp_degree}; each "
            f"device sends its shard of the KV over its own {link_GBps} GB/s link with 20 µs of latency. How "
            f"many milliseconds does the transfer take?")


@exercise("dis-3", rtol=1e-3, unit="ms",
          vary={"model": ("llama-3-8b", "llama-3-70b", "mistral-7b", "qwen2.5-7b"),
                "prompt_len": (1024, 2048, 4096, 8192), "tp_degree": (1, 2, 4), "link_GBps": (25, 50, 100)},
          text=_dis3_text)
def _kv_transfer_ms(model="llama-3-8b", prompt_len=4096, tp_degree=2, link_GBps=25, latency_us=20):
    kv = kv_transfer_bytes(get_model(model), prompt_len, tp_degree=tp_degree)
    return transfer_time_s(kv, link_GBps * 1e9, latency_us * 1e-6) * 1e3


def _dis4_text(decode_batch, prompt_len, max_batched_tokens, **_):
    return (f"**dis-4.** {_node(8)}: {decode_batch} sequences decode at 4,096 tokens of context. A "
            f"{prompt_len:,}-token prompt is prefilled with `max_batched_tokens={max_batched_tokens}` (decode "
            f"tokens first, the prompt in the rest of each step). How many milliseconds until its first "
            f"token, with no queue (roofline, overlapped bound, $2P$ FLOPs per token)?")


@exercise("dis-4", rtol=1e-3, unit="ms",
          vary={"decode_batch": (16, 32, 64), "prompt_len": (2048, 4096, 8192),
                "max_batched_tokens": (512, 1024, 2048)}, text=_dis4_text)
def _chunked_prefill_ttft_ms(model="llama-3-70b", gpu="h100-sxm", tp_degree=8, decode_batch=32,
                             context_len=4096, prompt_len=4096, max_batched_tokens=1024):
    return chunked_prefill(get_model(model), gpu, prompt_len=prompt_len, decode_batch=decode_batch,
                           context_len=context_len, max_batched_tokens=max_batched_tokens,
                           tp_degree=tp_degree).ttft_s * 1e3


@exercise("dis-5", rtol=0, unit="instances",
          vary={"prefill_ms": (60, 80, 100, 120), "rate_per_s": (20, 30, 40), "ttft_target_ms": (200, 300)},
          text="**dis-5.** A prefill takes {prefill_ms} ms. Requests arrive at random, {rate_per_s} a second, "
               "spread at random over the prefill instances. The *mean* TTFT (wait plus prefill) must stay "
               "within {ttft_target_ms} ms. How many instances are needed at least?")
def _prefill_instances_for_mean_ttft(prefill_ms=80, rate_per_s=30, ttft_target_ms=200):
    service = prefill_ms / 1e3
    rho = md1_max_utilization(service, (ttft_target_ms - prefill_ms) / 1e3)
    return math.ceil(rate_per_s * service / rho)


def _dis6_text(rate_per_s, tpot_s, usd_per_gpu_hour, **_):
    return (f"**dis-6.** Llama-3-70B (bf16) on H100 SXMs serves {rate_per_s} requests a second of 2,048-token "
            f"prompts and 256-token answers, TTFT p90 within 300 ms and at most {tpot_s * 1e3:g} ms a token, as "
            f"separate pools sized with `servelib.disagg.size_disaggregated`: prefill at TP=8, decode at TP=4, "
            f"over a 50 GB/s link with 100 µs latency. The GPUs are paid every hour; what do they cost per "
            f"million tokens (prompt and output) at \\${usd_per_gpu_hour:.2f} per GPU-hour?")


@exercise("dis-6", rtol=0.01, unit="$ per 1M tokens",
          vary={"rate_per_s": (16, 24, 32, 40), "tpot_s": (0.015, 0.02), "usd_per_gpu_hour": (2.0, 2.5, 3.0)},
          text=_dis6_text)
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
