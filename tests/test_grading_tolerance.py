"""Every exercise, in every variant, accepts an answer worked out from the numbers its statement
shows, at the precision shown (``70.55 billion``, not the config's 70,553,706,496), and
rejects the usual slips, each with its hint where the book has one.

``HAND[id](t)`` is that worked answer. ``t("8.03")`` reads a number *from the rendered
statement* (the test fails if the statement does not show it); ``t["model"]`` and
``t["gpu"]`` are the facts the statement prints; ``t.v`` holds the variant's inputs. Where a
statement says to use servelib (a simulation, a trace, the capstone's plan), the worked
answer is that call with the statement's numbers. Figures a statement leaves to the
chapter (Llama-3-8B's 8.03 billion parameters and 128 KiB of KV per token, Llama-3-70B's
70.55 billion and 320 KiB) are the chapter's printed values, in ``CHAPTER``.
"""
import dataclasses
import math

import pytest

from servelib.audit import audit, derive, right_tp_degree
from servelib.audit.examples import sound_plan
from servelib.disagg import SLO, Workload, size_disaggregated
from servelib.economics import replica_throughput, spillover_cost
from servelib.economics.scenarios import SELF_HOST, trace
from servelib.economics.spillover import floor_at_percentile
from servelib.grading import REGISTRY
from servelib.grading.check import compare
from servelib.grading.variants import GPUFacts, ModelFacts, all_variants, inputs_for, render
from servelib.hardware import get_gpu, ridge_point
from servelib.memory import kv_bytes_per_sequence, kv_bytes_per_token
from servelib.models import get_model
from servelib.precision import bytes_per_elem, bytes_per_param, get_precision, quantized_weight_bytes
from servelib.quantization import assumed_bandwidth_ratio
from servelib.roofline import critical_batch, decode_intensity_limit
from servelib.sim import Request, simulate, workloads

GiB = 2**30
#: Figures the chapters print once and the statements then use by name.
CHAPTER = {"p8b": 8.03e9, "kv8b": 128 * 1024, "p70b": 70.55e9, "kv70b": 320 * 1024,
           "gpt-4o": (2.50, 10.0), "gpt-4o-mini": (0.15, 0.60), "gpt-4o-cached": 1.25,
           "ptu": {"monthly": 260, "yearly": 221},
           "ptu_tpm": 2500, "ptu_weight": 4, "minutes_per_month": 730 * 60}


class Shown:
    """The statement of one variant: numbers are read from its text."""

    def __init__(self, ex, given):
        self.text = render(ex, given)
        self.v = inputs_for(ex, given)
        self.facts = {k: ModelFacts(x) if k == "model" else GPUFacts(x) if k == "gpu" else x
                      for k, x in self.v.items()}

    def __call__(self, shown) -> float:
        shown = f"{shown:,}" if isinstance(shown, int) else str(shown)
        assert shown in self.text, f"{shown!r} is not in the statement: {self.text}"
        return float(shown.replace(",", ""))

    def __getitem__(self, name):
        return self.facts[name]


def _tpot(p, kv_seq, batch, peak, bw):
    """One decode step by the roofline: FLOPs 2PB against bytes 2P + B * KV."""
    return max(2 * p * batch / peak, (2 * p + batch * kv_seq) / bw)


def _ttft(p, kv_token, prompt, peak, bw):
    """A prefill by the roofline: FLOPs 2PN against the weights and the prompt's KV."""
    return max(2 * p * prompt / peak, (2 * p + prompt * kv_token) / bw)


def _min_tp(gib, p, kv, n):
    return next(tp for tp in (1, 2, 4, 8) if (gib * GiB - 2 * p / tp) * 0.9 >= n * kv / tp)


def _continuous(outputs, slots):
    """Steps until the last of ``outputs`` finishes with ``slots`` slots, by hand."""
    waiting, running, steps = list(outputs), [], 0
    while waiting or running:
        while waiting and len(running) < slots:
            running.append(waiting.pop(0))
        running = [left - 1 for left in running]
        running = [left for left in running if left > 0]
        steps += 1
    return steps


def _goodput_by_hand(outputs, step_ms, ttft_slo_ms, tpot_slo_ms):
    """Continuous batching on two slots, step by step: each request's first-token step and
    last step; the good ones over the makespan (a one-token answer has no TPOT)."""
    waiting, running, step, good = list(enumerate(outputs)), {}, 0, 0
    first = {}
    while waiting or running:
        while waiting and len(running) < 2:
            i, n = waiting.pop(0)
            running[i] = n
        step += 1
        for i in list(running):
            first.setdefault(i, step)
            running[i] -= 1
            if running[i] == 0:
                del running[i]
                n = outputs[i]
                tpot_ok = n == 1 or (step - first[i]) * step_ms / (n - 1) <= tpot_slo_ms
                good += first[i] * step_ms <= ttft_slo_ms and tpot_ok
    return good / (step * step_ms / 1e3)


def _ptu_tpm(f):
    return CHAPTER["ptu_tpm"] / ((1 - f) + CHAPTER["ptu_weight"] * f)


def _blended_per_1k(prices, f):
    c_in, c_out = prices
    return (c_in * (1 - f) + c_out * f) / 1000


def _gpu(t):
    return get_gpu(t.v["gpu"])


def _pct(t, name="output_fraction"):
    """A fraction the statement prints as a whole percentage (``25%``), read back."""
    return t(f"{t.v[name]:.0%}"[:-1]) / 100


def _ptu_break_even(term, f, cached=0.0, cached_weight=0.0, cached_price=None, usd_per_ptu_month=None):
    """A PTU's break-even utilisation against gpt-4o PAYG, from the printed prices and rates:
    the PTU month over the PAYG value of the tokens it carries at full use."""
    c_in, c_out = CHAPTER["gpt-4o"]
    usd_per_ptu_month = CHAPTER["ptu"][term] if usd_per_ptu_month is None else usd_per_ptu_month
    cached_price = CHAPTER["gpt-4o-cached"] if cached_price is None else cached_price
    units = (1 - f) * (1 - cached) + (1 - f) * cached * cached_weight + CHAPTER["ptu_weight"] * f
    usd_per_token = ((1 - f) * (1 - cached) * c_in + (1 - f) * cached * cached_price + f * c_out) / 1e6
    tokens = CHAPTER["ptu_tpm"] / units * CHAPTER["minutes_per_month"]
    return usd_per_ptu_month / (tokens * usd_per_token)


def _percentile(u):
    return 100 * (1 - min(u, 1))


def _kv7(t, every_layer_full=False, reserve=0.9):
    """gpt-oss-20b's sequences on one GPU: 12 full layers, 12 of a 128-token window."""
    context = t(t.v["context_len"])
    per_layer_token = 2 * t(8) * t(64) * 2                          # K and V, fp16
    tokens = 24 * context if every_layer_full else t(12) * (context + min(t(128), context))
    budget = (t(t["gpu"].memory_gib) * GiB - 2 * t("20.91") * 1e9) * reserve
    return math.floor(budget / (per_layer_token * tokens))


def _llama8(t):
    """Llama-3-8B's parameters and KV bytes per token, as the statement prints them."""
    return t("8.03") * 1e9, t(128) * 1024


def _decode_intensity(t, p, kv_token, layers, heads, head_dim):
    """Batch-1 decode: (2P + 4 L H d_head c) FLOPs over (2P + c KV) bytes, at the context c shown."""
    c = t(t.v["context_len"])
    return (2 * p + 4 * layers * heads * head_dim * c) / (2 * p + c * kv_token)


def _rl3(t, attention=True):
    m = t["model"]
    return _decode_intensity(t, t(m.billions) * 1e9, t(m.kv_kib_per_token) * 1024, t(m.n_layers),
                             t(m.n_heads) if attention else 0, t(m.head_dim))


def _rl4(t, attention=True):
    ridge = t(t["gpu"].bf16_tflops) * 1e12 / (t(t["gpu"].gb_per_s) * 1e9)
    return min(1, _decode_intensity(t, *_llama8(t), t(32), t(32) if attention else 0, t(128)) / ridge)


def _rl6(t, reserve=0.9, kv_split_by_tp=True):
    """The war story's gain: the batch the KV memory holds, by hand, then the roofline ratio."""
    p, kv, tp, c = t("70.55") * 1e9, t(320) * 1024, t(2), t(t.v["context_len"])
    kv_device = kv / tp if kv_split_by_tp else kv
    batch = math.floor((t(80) * GiB - 2 * p / tp) * reserve / (kv_device * c))
    peak, bw = t("989.5") * 1e12, t("3.35") * 1e12
    return batch * _tpot(p / tp, kv / tp * c, 1, peak, bw) / _tpot(p / tp, kv / tp * c, batch, peak, bw)


def _attention_flops(t):
    """One sequence's attention FLOPs in a decode step, from the printed shape: 4 L H d c."""
    m = t["model"]
    return 4 * t(m.n_layers) * t(m.n_heads) * t(m.head_dim) * t(t.v["context_len"])


def _self_host(t):
    """The self-hosted deployment as an ec-9 statement prints it, and its hosted price."""
    sh = dataclasses.replace(SELF_HOST, usd_per_gpu_hour=t(f"{t.v['usd_per_gpu_hour']:.2f}"),
                             usd_per_engineer_year=t(180_000), batch=int(t(64)), context_len=int(t(4096)))
    hosted = dataclasses.replace(SELF_HOST.hosted, usd_per_1k_input=t("0.90") / 1000,
                                 usd_per_1k_output=t("0.90") / 1000)
    return sh, hosted



# Chapters 08-10 (quantization, speculative decoding, disaggregation): the sizes their
# statements print, read back, and the roofline worked by hand from them.

def _bpp(t):
    """Bytes per weight of the statement's format, as printed (0.625, 0.5195, 1)."""
    return t(f"{bytes_per_param(t.v['weights']):.4g}")


def _quant2(t, embedding_quantized=False):
    p = t(t["model"].billions) * 1e9
    table = t(t["model"].vocab_size) * t(t["model"].hidden_size)
    return ((p - table) * _bpp(t) + table * (_bpp(t) if embedding_quantized else 2)) / GiB


def _quant3(t, kv_bytes=1, reserve=0.9):
    budget = (2 * t(t["gpu"].memory_gib) * GiB - 2 * t("70.55") * 1e9) * reserve
    return math.floor(budget / (2 * t(80) * t(8) * t(128) * kv_bytes * t(t.v["context_len"])))


def _quant4(t):
    table = t(128_256) * t(8192)
    w = (t("70.55") * 1e9 - table) * _bpp(t) + table * 2
    kv = 2 * t(80) * t(8) * t(128) * 1 * t(t.v["context_len"])
    return next(tp for tp in (1, 2, 4, 8) if (t(t["gpu"].memory_gib) * GiB - w / tp) * 0.9 >= kv / tp)


def _quant5(t, ratio=None):
    m, w = get_model(t.v["model"]), t.v["weights"]
    w16 = t(f"{quantized_weight_bytes(m, 'bf16') / 1e9:.2f}") * 1e9
    wq = t(f"{quantized_weight_bytes(m, w) / 1e9:.2f}") * 1e9
    r = t(f"{assumed_bandwidth_ratio(w):.3f}") if ratio is None else ratio
    kv_bytes = t(t["model"].kv_kib_per_token) * 1024 * t(t.v["context_len"])
    return (w16 + kv_bytes) / (wq / r + kv_bytes)


def _quant6(t, capped=True, ratio=None):
    m, w, kv = get_model("llama-3-70b"), t.v["weights"], t.v["kv"]
    p = t("70.55") * 1e9
    wq = t(f"{quantized_weight_bytes(m, w) / 1e9:.2f}") * 1e9
    kv_seq = t(f"{kv_bytes_per_token(m, bytes_per_elem(kv)) / 1024:g}") * 1024 * t(t.v["context_len"])
    r = t(f"{assumed_bandwidth_ratio(w):.3f}") if ratio is None else ratio
    fits = math.floor((t(80) * GiB - wq) * 0.9 / kv_seq)
    b = min(t(64), fits) if capped else 64
    tpot = max(2 * p * b / (t("989.5") * 1e12), (wq / r + b * kv_seq) / (t("3.35") * 1e12))
    return t(f"{t.v['usd_per_gpu_hour']:.2f}") / 3600 * tpot / b * 1e6


def _tokens_per_round(a, k):
    return sum(a ** i for i in range(int(k) + 1))


def _spec_batch1(t, k=None, draft_free=False, verify_steps=1, tokens=None):
    """Speed-up at batch 1 from the printed sizes: every pass memory-bound, bandwidth cancels."""
    k = t(t.v["draft_len"]) if k is None else k
    ctx = t(t.v["context_len"])
    target = 2 * t("70.55") * 1e9 + t(320) * 1024 * ctx
    draft = 2 * t("8.03") * 1e9 + t(128) * 1024 * ctx
    e = _tokens_per_round(t(t.v["acceptance_rate"]), k) if tokens is None else tokens
    return e * target / ((0 if draft_free else k * draft) + verify_steps * target)


def _spec_scan(t, attention=True):
    """spec-3 by hand: the first batch whose round yields no more tokens per second."""
    peak, bw, ctx = t("989.5") * 1e12, t("3.35") * 1e12, t(t.v["context_len"])
    a, k = t(t.v["acceptance_rate"]), int(t(t.v["draft_len"]))

    def pass_s(p, layers, heads, head_dim, kv_token, b, n):
        flops = n * b * (2 * p + (4 * layers * heads * head_dim * ctx if attention else 0)) / 8
        return max(flops / peak, (2 * p + b * kv_token * ctx) / 8 / bw)
    target = (t("70.55") * 1e9, t(80), t(64), t(128), t(320) * 1024)
    draft = (t("8.03") * 1e9, t(32), t(32), t(128), t(128) * 1024)
    e = _tokens_per_round(a, k)
    return next(b for b in range(1, 4097) if e * pass_s(*target, b, 1)
                <= k * pass_s(*draft, b, 1) + pass_s(*target, b, k + 1))


def _spec4(t, k_for_k_plus_1=False, draft_free=False):
    ridge = t(t["gpu"].bf16_tflops) / t(t["gpu"].tb_per_s)            # TFLOP/s over TB/s
    p70, p8 = t("70.55") * 1e9, t("8.03") * 1e9
    kv70, kv8 = t(320) * 1024, t(128) * 1024
    bstar = math.ceil(ridge * 2 * p70 / (2 * p70 - ridge * kv70))       # a 1-token context
    c = 0 if draft_free else (2 * p8 + kv8) / (2 * p70 + kv70)
    k = t(t.v["draft_len"])
    return bstar * (_tokens_per_round(t(t.v["acceptance_rate"]), k) - k * c) / (k if k_for_k_plus_1 else k + 1)


def _spec5(t, draft_free=False):
    s = t(f"{t.v['tokens_per_s']:g}") / t("25.25")
    c = t("25.25") / t("196.80")
    k = t(t.v["draft_len"])
    e = s * (1 if draft_free else 1 + k * c)
    lo, hi = 0.0, 1.0
    for _ in range(60):
        lo, hi = ((lo + hi) / 2, hi) if _tokens_per_round((lo + hi) / 2, k) < e else (lo, (lo + hi) / 2)
    return lo


def _mixed(t, tp, batch, ctx, prompt, serial=False):
    """One mixed step by the chapter's roofline, from the printed sizes (s)."""
    p, kv = t("70.55") * 1e9, t(320) * 1024 / tp
    compute = 2 * p * (batch + prompt) / (tp * t("989.5") * 1e12)
    memory = (2 * p / tp + batch * kv * ctx + prompt * kv) / (t("3.35") * 1e12)
    return compute + memory if serial else max(compute, memory)


def _dis1(t, **kw):
    tp, b, ctx = t.v["tp_degree"], t(t.v["decode_batch"]), t(t.v["context_len"])
    return _mixed(t, tp, b, ctx, t(t.v["prompt_len"]), **kw) / _mixed(t, tp, b, ctx, 0, **kw)


def _dis2(t):
    tp, b, ctx = t.v["tp_degree"], t(t.v["decode_batch"]), t(t.v["context_len"])
    p, kv, peak, bw = t("70.55") * 1e9, t(320) * 1024 / tp, t("989.5") * 1e12, t("3.35") * 1e12
    per_token = 2 * p / (tp * peak)
    return math.floor(((2 * p / tp + b * kv * ctx) / bw - per_token * b) / (per_token - kv / bw))


def _dis4(t, chunk_without_decodes=False):
    b, s, c = t(t.v["decode_batch"]), t(t.v["prompt_len"]), t(str(t.v["max_batched_tokens"]))
    per = min(c if chunk_without_decodes else c - b, s)
    n = math.ceil(s / per)
    return ((n - 1) * _mixed(t, 8, b, t(4096), per) + _mixed(t, 8, b, 4096, s - (n - 1) * per)) * 1e3


def _dis5(t):
    s = t(t.v["prefill_ms"]) / 1e3
    budget = (t(t.v["ttft_target_ms"]) - t(t.v["prefill_ms"])) / 1e3
    return math.ceil(t(t.v["rate_per_s"]) * s / (2 * budget / (2 * budget + s)))


def _dis6(t, per_output_token=False):
    rate, tpot = t(t.v["rate_per_s"]), t(f"{t.v['tpot_s'] * 1e3:g}") / 1e3
    wl = Workload(rate, int(t(2048)), int(t(256)))
    pools = size_disaggregated(get_model("llama-3-70b"), "h100-sxm", wl, SLO(t(300) / 1e3, tpot), prefill_tp=8,
                               decode_tp=4, link_Bps=t(50) * 1e9, link_latency_s=t(100) * 1e-6)
    tokens_per_s = rate * (256 if per_output_token else 2048 + 256)
    return pools.n_gpus * t(f"{t.v['usd_per_gpu_hour']:.2f}") / (tokens_per_s * 3600) * 1e6


HAND = {
    "pd-1": lambda t: 2 * t(t["model"].billions) * 1e9 * t(t.v["prompt_len"]) / 1e12,
    "pd-2": lambda t: 1e3 * _ttft(*_llama8(t), t(t.v["prompt_len"]),
                                  t(t["gpu"].bf16_tflops) * 1e12, t(t["gpu"].tb_per_s) * 1e12),
    "pd-3": lambda t: 1e3 * _tpot(_llama8(t)[0], _llama8(t)[1] * t(t.v["context_len"]), 1,
                                  get_gpu(t.v["gpu"]).peak_flops("bf16"), t(t["gpu"].gb_per_s) * 1e9),
    "pd-4": lambda t: _ttft(*_llama8(t), t(t.v["prompt_len"]), t(t["gpu"].bf16_tflops) * 1e12,
                            t(t["gpu"].tb_per_s) * 1e12)
    / _tpot(_llama8(t)[0], _llama8(t)[1] * t.v["prompt_len"], 1, t(t["gpu"].bf16_tflops) * 1e12,
            t(t["gpu"].tb_per_s) * 1e12),
    "pd-5": lambda t: (2 * t(t["model"].n_layers) * t(t["model"].n_heads) * t(t["model"].head_dim)
                       * t(t.v["prompt_len"]) * (t.v["prompt_len"] + 1))
    / (2 * t(t["model"].billions) * 1e9 * t.v["prompt_len"]),
    "pd-6": lambda t: (_ttft(*_llama8(t), t(t.v["prompt_len"]), t(t["gpu"].bf16_tflops) * 1e12,
                             t(t["gpu"].gb_per_s) * 1e9)
                       + t(t.v["output_len"] - 1) * _tpot(_llama8(t)[0], _llama8(t)[1] * t(t.v["prompt_len"]
                                                          + t.v["output_len"]), 1, t(t["gpu"].bf16_tflops) * 1e12,
                                                          t(t["gpu"].gb_per_s) * 1e9)),
    "rl-1": lambda t: t(t["gpu"].bf16_tflops) * 1e12 / (t(t["gpu"].gb_per_s) * 1e9),
    "rl-2": lambda t: t(f"{get_gpu('t4').flops[t.v['dtype']] / 1e12:g}") * 1e12 / (t("320") * 1e9),
    "rl-3": lambda t: _rl3(t),
    "rl-4": lambda t: _rl4(t),
    "rl-5": lambda t: min(t(t["gpu"].bf16_tflops), t(t.v["intensity"]) * t(t["gpu"].tb_per_s)),
    "rl-6": lambda t: _rl6(t),
    "kv-1": lambda t: 2 * t(t["model"].n_layers) * t(t["model"].n_kv_heads) * t(t["model"].head_dim)
    * {"fp16": 2, "fp8": 1}[t.v["kv_dtype"]],
    "kv-2": lambda t: 2 * t(t["model"].n_layers) * t(t["model"].n_kv_heads) * t(t["model"].head_dim) * 2
    * t(t.v["context_len"]) / GiB,
    "kv-3": lambda t: math.floor((t(t["gpu"].memory_gib) * GiB - 2 * t("6.74") * 1e9) * 0.9
                                 / (2 * 32 * 32 * 128 * 2 * t(t.v["context_len"]))),
    "kv-4": lambda t: math.floor((t(t["gpu"].memory_gib) * GiB - 2 * t("7.62") * 1e9) * 0.9
                                 / (2 * 28 * 4 * 128 * 1 * t(t.v["context_len"]))),
    "kv-5": lambda t: _min_tp(t(t["gpu"].memory_gib), t("70.55") * 1e9, t(320) * 1024, t(t.v["context_len"])),
    "kv-6": lambda t: (math.floor((t(t.v["n_gpus"]) * t(80) * GiB - 2 * t(70) * 1e9) * 0.9
                                  / (t(320) * 1024 * t(t.v["context_len"])))
                       - math.floor((t.v["n_gpus"] * 80 * GiB * t("0.9") - 2 * 70e9)
                                    / (320 * 1024 * t.v["context_len"]))),
    "kv-7": lambda t: _kv7(t),
    "bt-1": lambda t: (2 * t(t["model"].billions) * 1e9 + t(t.v["batch"]) * t(t.v["context_len"])
                       * t(t["model"].kv_kib_per_token) * 1024) / 1e9,
    "bt-2": lambda t: math.ceil(
        (r := t(t["gpu"].bf16_tflops) / t(t["gpu"].tb_per_s)) * 2 * t(t["model"].billions) * 1e9
        / (2 * t(t["model"].billions) * 1e9 + _attention_flops(t)
           - r * t(t.v["context_len"]) * t(t["model"].kv_kib_per_token) * 1024)),
    "bt-3": lambda t: ((2 * t(t["model"].billions) * 1e9 + _attention_flops(t))
                       / (t(t.v["context_len"]) * t(t["model"].kv_kib_per_token) * 1024)),
    "bt-4": lambda t: _min_tp(t(t["gpu"].memory_gib), CHAPTER["p70b"], CHAPTER["kv70b"], t(t.v["context_len"])),
    "bt-5": lambda t: (8 // t.v["tp_degree"]) * math.floor(
        (80 * GiB - 2 * CHAPTER["p70b"] / t.v["tp_degree"]) * 0.9
        / (CHAPTER["kv70b"] / t.v["tp_degree"] * t.v["context_len"])),
    "bt-6": lambda t: t(t.v["batch"]) / _tpot(t("8.03") * 1e9, t(128) * 1024 * t(t.v["context_len"]), t.v["batch"],
                                              t(t["gpu"].bf16_tflops) * 1e12, t(t["gpu"].tb_per_s) * 1e12),
    "sch-1": lambda t: _continuous(t.v["outputs"], 2) * t(t.v["step_ms"]) / 1e3,
    "sch-2": lambda t: (simulate(policy="static", **(kw := workloads.uneven_outputs(seed=int(t(t.v["seed"])))))
                        .makespan_s / simulate(policy="continuous", **kw).makespan_s),
    "sch-3": lambda t: t(t.v["kv_tokens"]) // (t(t.v["prompt_len"]) + t(t.v["max_output_len"])),
    "sch-4": lambda t: 4 * ((t(t.v["cache_tokens"]) - 4 * t(t.v["prompt_len"] + 1)) // 4 + 1),
    "sch-5": lambda t: math.ceil(t(t.v["tokens"]) / t(t.v["block_size"])) * t.v["block_size"] - t.v["tokens"],
    "sch-6": lambda t: math.ceil(t(t.v["prompt_len"]) / (t(t.v["max_batched_tokens"]) - 1)) * t(t.v["step_ms"]) / 1e3,
    # The first pair holds both slots from prefill + transfer; the second pair waits for them.
    "dis-7": lambda t: (t(t.v["prefill_ms"]) + t(t.v["transfer_ms"])
                        + 2 * (t(t.v["output_len"]) - 1) * t(t.v["step_ms"])),
    "eng-1": lambda t: math.ceil((t(t.v["prompt_len"]) + t(t.v["generated"])) / t(t.v["block_size"])),
    "eng-2": lambda t: t(f"{t.v['rate_per_s']:g}") * t(f"{t.v['mean_latency_s']:g}"),
    "eng-3": lambda t: t(2) + t("0.1") * (t(t.v["decode"]) + t(t.v["chunk"]))
    + t(1) * 1e-3 * t.v["decode"] * t(t.v["max_context"]) + t("0.5"),
    "eng-4": lambda t: _goodput_by_hand(t.v["outputs"], t(t.v["step_ms"]), t(t.v["ttft_slo_ms"]),
                                        t(t.v["tpot_slo_ms"])),
    "eng-5": lambda t: (t(t.v["n_requests"]) - 1) * (t(t.v["system_len"]) // t(t.v["block_size"])),
    "eng-6": lambda t: t(f"{t.v['fixed_ms']:g}") + t(f"{t.v['per_token_ms']:g}") * t(t.v["chunk"]),
    "ec-1": lambda t: 1000 * _blended_per_1k(CHAPTER[t.v["api"]], t(f"{t.v['output_fraction']:.0%}"[:-1]) / 100),
    "ec-2": lambda t: (t(t.v["n_ptu"]) * CHAPTER["ptu"][t.v["term"]]
                       / _blended_per_1k(CHAPTER["gpt-4o"], t(f"{t.v['output_fraction']:.0%}"[:-1]) / 100) * 1000),
    "ec-3": lambda t: max(15, 5 * math.ceil(t(t.v["tokens_per_minute"]) / _ptu_tpm(t.v["output_fraction"]) / 5 - 1e-9)),
    "ec-4": lambda t: CHAPTER["ptu"][t.v["term"]] / (
        _ptu_tpm(f := t(f"{t.v['output_fraction']:.0%}"[:-1]) / 100) * CHAPTER["minutes_per_month"] / 1000
        * _blended_per_1k(CHAPTER["gpt-4o"], f)),
    "ec-5": lambda t: spillover_cost(trace(), floor_at_percentile(trace(), t.v["percentile"]), t("0.1095"),
                                     _blended_per_1k(CHAPTER["gpt-4o"], t.v["output_fraction"])).total_usd,
    "ec-6": lambda t: dataclasses.replace(SELF_HOST, usd_per_gpu_hour=t(f"{t.v['usd_per_gpu_hour']:.2f}"))
    .crossover(n_engineers=t.v["n_engineers"]),
    "ec-7": lambda t: replica_throughput(get_model("llama-3-8b"), t.v["gpu"], batch=int(t(t.v["batch"])),
                                         context_len=int(t(t.v["context_len"])),
                                         output_fraction=t.v["output_fraction"]).tokens_per_gpu_s,
    "ec-8": lambda t: _percentile(_ptu_break_even(t.v["term"], _pct(t),
                                                  usd_per_ptu_month=t(str(CHAPTER["ptu"][t.v["term"]])))),
    "ec-9": lambda t: (lambda sh, hosted: sh.crossover(n_engineers=t.v["n_engineers"], price=hosted))(*_self_host(t)),
    "ec-10": lambda t: _ptu_break_even(t.v["term"], _pct(t), cached=t.v["cached_input_fraction"]),
    "cap-1": lambda t: derive(dataclasses.replace(sound_plan(), context_len=int(t(t.v["context_len"])))).concurrency,
    "cap-2": lambda t: derive(dataclasses.replace(sound_plan(), kv_bytes_per_elem=1,
                                                  context_len=int(t(t.v["context_len"])))).concurrency,
    "cap-3": lambda t: derive(dataclasses.replace(sound_plan(), output_fraction=t(
        f"{t.v['output_fraction']:.0%}"[:-1]) / 100)).break_even_utilization,
    "cap-4": lambda t: right_tp_degree(dataclasses.replace(sound_plan(), target_concurrency=int(t(t.v["target"])))),
    "cap-5": lambda t: derive(dataclasses.replace(sound_plan(), engineering_fte=t.v["engineering_fte"]))
    .crossover_tokens_per_month / 1e9,
    "cap-7": lambda t: derive(dataclasses.replace(sound_plan(), output_fraction=_pct(t))).cheapest_floor_percentile,
    "cap-6": lambda t: len(audit(dataclasses.replace(sound_plan(), admission="prompt", shared_tiers=True,
                                                     batching="static", claimed_concurrency=int(t(t.v["claimed"]))))),
    "quant-1": lambda t: t(t.v["bits"]) / 8 + (t(16) + t(t.v["zero_bits"])) / 8 / t(t.v["group_size"]),
    "quant-2": lambda t: _quant2(t),
    "quant-3": lambda t: _quant3(t),
    "quant-4": lambda t: _quant4(t),
    "quant-5": lambda t: _quant5(t),
    "quant-6": lambda t: _quant6(t),
    "spec-1": lambda t: _tokens_per_round(t(t.v["acceptance_rate"]), t(t.v["draft_len"])),
    "spec-2": lambda t: _spec_batch1(t),
    "spec-3": lambda t: _spec_scan(t),
    "spec-4": lambda t: _spec4(t),
    "spec-5": lambda t: _spec5(t),
    "spec-6": lambda t: max(range(1, 11), key=lambda k: _spec_batch1(t, k=k)),
    "dis-1": lambda t: _dis1(t),
    "dis-2": lambda t: _dis2(t),
    "dis-3": lambda t: (2 * t(t["model"].n_layers) * t(t["model"].n_kv_heads) / t.v["tp_degree"]
                        * t(t["model"].head_dim) * 2 * t(t.v["prompt_len"]) / (t(t.v["link_GBps"]) * 1e9)
                        + t(20) * 1e-6) * 1e3,
    "dis-4": lambda t: _dis4(t),
    "dis-5": lambda t: _dis5(t),
    "dis-6": lambda t: _dis6(t),
}

#: The usual slips: (name, the wrong answer, words its hint must contain: a string, None for
#: no hint required, or a function of the statement for a hint only some variants have).
SLIPS = {
    "pd-1": [("forgot the 2 of 2PN", lambda t, ref: ref / 2, "2x too small"),
             ("GFLOP for TFLOP", lambda t, ref: ref * 1000, "1000x too large")],
    "pd-2": [("seconds for ms", lambda t, ref: ref / 1000, "1000x too small"),
             ("bandwidth-bound time", lambda t, ref: 1e3 * 2 * CHAPTER["p8b"] / _gpu(t).hbm_bandwidth_Bps, None)],
    "pd-3": [("seconds for ms", lambda t, ref: ref / 1000, "1000x too small"),
             ("weights only, no KV", lambda t, ref: 1e3 * 2 * CHAPTER["p8b"] / _gpu(t).hbm_bandwidth_Bps, None)],
    "pd-4": [("upside down", lambda t, ref: 1 / ref, None)],
    "pd-5": [("a percentage", lambda t, ref: ref * 100, "percentage"),
             ("no causal halving", lambda t, ref: ref * 2, "2x too large")],
    "pd-6": [("TTFT left out", lambda t, ref: ref - _ttft(CHAPTER["p8b"], CHAPTER["kv8b"], t.v["prompt_len"],
                                                          _gpu(t).peak_flops("bf16"), _gpu(t).hbm_bandwidth_Bps),
              None)],
    "rl-1": [("GB/s read as TB/s", lambda t, ref: ref / 1000, "1000x too small"), ("inverse", lambda t, ref: 1 / ref, None)],
    "rl-2": [("GB/s read as TB/s", lambda t, ref: ref / 1000, "1000x too small")],
    "rl-3": [("weights only: attention and KV left out", lambda t, ref: 1.0, None),
             ("attention's FLOPs left out", lambda t, ref: _rl3(t, attention=False), None),
             ("2 FLOPs per byte", lambda t, ref: 2 * ref, "2x too large")],
    "rl-4": [("a percentage", lambda t, ref: ref * 100, "percentage"),
             ("attention's FLOPs left out", lambda t, ref: _rl4(t, attention=False), None)],
    "rl-5": [("no roof", lambda t, ref: t.v["intensity"] * _gpu(t).hbm_bandwidth_Bps / 1e12 * 1.5, None),
             ("GFLOP/s", lambda t, ref: ref * 1000, "1000x too large")],
    "rl-6": [("the batch as the factor (KV reads left out)", lambda t, ref: float(math.floor(
                 (80 * GiB - 70.55e9) * 0.9 / (160 * 1024 * t.v["context_len"]))), None),
             ("no reserve", lambda t, ref: _rl6(t, reserve=1.0), None),
             ("KV cache not split by TP", lambda t, ref: _rl6(t, kv_split_by_tp=False), None)],
    "kv-1": [("K and V counted once", lambda t, ref: ref / 2, "K and V"),
             ("attention heads for KV heads", lambda t, ref: ref * t["model"].n_heads / t["model"].n_kv_heads,
              lambda t: "attention" if t["model"].n_heads / t["model"].n_kv_heads in (4, 8) else None)],
    "kv-2": [("GB for GiB", lambda t, ref: ref * GiB / 1e9, "GB (10^9 bytes) where GiB"),
             ("K and V counted once", lambda t, ref: ref / 2, "K and V")],
    "kv-3": [("one too many", lambda t, ref: ref + 1, "off by one"),
             ("no reserve", lambda t, ref: math.floor((t(t["gpu"].memory_gib) * GiB - 2 * 6.74e9)
                                                      / (2 * 32 * 32 * 128 * 2 * t.v["context_len"])), None)],
    "kv-4": [("fp16 cache", lambda t, ref: math.floor((t(t["gpu"].memory_gib) * GiB - 2 * 7.62e9) * 0.9
                                                      / (2 * 28 * 4 * 128 * 2 * t.v["context_len"])), None),
             ("one too many", lambda t, ref: ref + 1, "off by one")],
    "kv-5": [("one degree short", lambda t, ref: ref / 2, None)],
    "kv-6": [("one too many", lambda t, ref: ref + 1, "off by one")],
    "kv-7": [("every layer caching the whole context", lambda t, ref: _kv7(t, every_layer_full=True),
              "half of this model's layers"),
             ("one too many", lambda t, ref: ref + 1, "off by one"),
             ("no reserve", lambda t, ref: _kv7(t, reserve=1.0), None)],
    "bt-1": [("GiB for GB", lambda t, ref: ref * 1e9 / GiB, "GiB (2^30 bytes) where GB"),
             ("weights only", lambda t, ref: 2 * float(t["model"].billions), None)],
    "bt-2": [("one too few", lambda t, ref: ref - 1, "off by one"),
             ("attention left out", lambda t, ref: critical_batch(get_model(t.v["model"]), ridge_point(t.v["gpu"]),
                                                                  t.v["context_len"], attention=False), None)],
    "bt-3": [("attention left out", lambda t, ref: decode_intensity_limit(get_model(t.v["model"]), t.v["context_len"],
                                                                          attention=False), None),
             ("forgot the 2 of 2P", lambda t, ref: ref - get_model(t.v["model"]).n_params
              / kv_bytes_per_sequence(get_model(t.v["model"]), t.v["context_len"]), None)],
    "bt-4": [("one degree short", lambda t, ref: ref / 2, None)],
    "bt-5": [("one replica only", lambda t, ref: ref * t.v["tp_degree"] / 8, None), ("one too many", lambda t, ref: ref + 1, "off by one")],
    "bt-6": [("per sequence", lambda t, ref: ref / t.v["batch"], None)],
    "sch-1": [("static batching", lambda t, ref: simulate([Request(0, 16, o) for o in t.v["outputs"]], policy="static",
                                                          max_batch=2, step_time_s=t.v["step_ms"] / 1e3).makespan_s,
               None)],
    "sch-2": [("upside down", lambda t, ref: 1 / ref, None)],
    "sch-3": [("admitted on the prompt", lambda t, ref: min(64, t.v["kv_tokens"] // t.v["prompt_len"]), None),
              ("one too many", lambda t, ref: ref + 1, "off by one")],
    "sch-4": [("one step more", lambda t, ref: ref + 4, None)],
    "sch-5": [("the used part of the last block", lambda t, ref: t.v["tokens"] % t.v["block_size"], None)],
    "sch-6": [("one step less", lambda t, ref: ref - t.v["step_ms"] / 1e3, None)],
    "dis-7": [("the transfer left out", lambda t, ref: ref - t.v["transfer_ms"], None),
              ("no wait for a slot", lambda t, ref: 2 * t.v["prefill_ms"] + t.v["transfer_ms"]
               + (t.v["output_len"] - 1) * t.v["step_ms"], None),
              ("a decode step for every token", lambda t, ref: ref + 2 * t.v["step_ms"], None),
              ("seconds for ms", lambda t, ref: ref / 1000, "1000x too small")],
    "eng-1": [("the prompt's blocks only", lambda t, ref: math.ceil(t.v["prompt_len"] / t.v["block_size"]), None),
              ("tokens over the block size, rounded down",
               lambda t, ref: (t.v["prompt_len"] + t.v["generated"]) // t.v["block_size"], "off by one")],
    "eng-2": [("rate over latency", lambda t, ref: t.v["rate_per_s"] / t.v["mean_latency_s"], None)],
    "eng-3": [("seconds for ms", lambda t, ref: ref / 1000, "1000x too small"),
              ("keys of one sequence only", lambda t, ref: ref - 1e-3 * (t.v["decode"] - 1) * t.v["max_context"], None),
              ("the chunk's tokens left out", lambda t, ref: ref - 0.1 * t.v["chunk"], None)],
    "eng-4": [("every request counted", lambda t, ref: 4 / (_continuous(t.v["outputs"], 2) * t.v["step_ms"] / 1e3),
               None),
              ("per millisecond", lambda t, ref: ref / 1000, "1000x too small")],
    "eng-5": [("the whole prefix saved once per request", lambda t, ref: t.v["n_requests"] * (
                  t.v["system_len"] // t.v["block_size"]), None),
              ("partial blocks shared too", lambda t, ref: (t.v["n_requests"] - 1) * -(-t.v["system_len"]
                                                                                      // t.v["block_size"]), None)],
    "eng-6": [("the whole prompt in one step", lambda t, ref: t.v["fixed_ms"] + t.v["per_token_ms"] * 2048, None),
              ("the fixed cost left out", lambda t, ref: t.v["per_token_ms"] * t.v["chunk"], None)],
    "ec-1": [("per 1k tokens", lambda t, ref: ref / 1000, "1000x too small")],
    "ec-2": [("per-1M price taken as per-1k", lambda t, ref: ref / 1000, "1000x too small")],
    "ec-3": [("not rounded to the step", lambda t, ref: ref - 5, None)],
    "ec-4": [("a percentage", lambda t, ref: ref * 100, "percentage")],
    "ec-5": [("floor only", lambda t, ref: 0.1095 * floor_at_percentile(trace(), t.v["percentile"]), None)],
    "ec-6": [("per 1k tokens", lambda t, ref: ref / 1000, "1000x too small")],
    "ec-7": [("per second of the replica, decode only",
              lambda t, ref: replica_throughput(get_model("llama-3-8b"), t.v["gpu"], batch=t.v["batch"],
                                                context_len=t.v["context_len"], output_fraction=1.0).tokens_per_gpu_s,
              None)],
    "ec-8": [("a fraction", lambda t, ref: ref / 100, "percentage"),
             ("100 u* (the break-even as the percentile)", lambda t, ref: 100 - ref, None),
             ("the median", lambda t, ref: 50.0, None),
             ("the other term's price", lambda t, ref: _percentile(_ptu_break_even(
                 {"monthly": "yearly", "yearly": "monthly"}[t.v["term"]], t.v["output_fraction"])), None),
             ("capacity counted in plain tokens (no output weight)", lambda t, ref: _percentile(
                 _ptu_break_even(t.v["term"], t.v["output_fraction"])
                 / (1 + (CHAPTER["ptu_weight"] - 1) * t.v["output_fraction"])), None)],
    "ec-9": [("against gpt-4o, not the same model hosted", lambda t, ref: _self_host(t)[0].crossover(
                 n_engineers=t.v["n_engineers"]), None),
             ("per 1k tokens", lambda t, ref: ref / 1000, "1000x too small"),
             ("no engineer", lambda t, ref: (lambda sh, hosted: sh.crossover(n_engineers=0, price=hosted))(
                 *_self_host(t)), None)],
    "ec-10": [("a percentage", lambda t, ref: ref * 100, "percentage"),
              ("no cache", lambda t, ref: _ptu_break_even(t.v["term"], t.v["output_fraction"]), None),
              ("cached tokens still counted by the PTU", lambda t, ref: _ptu_break_even(
                  t.v["term"], t.v["output_fraction"], cached=t.v["cached_input_fraction"], cached_weight=1), None),
              ("cached tokens billed at the full price", lambda t, ref: _ptu_break_even(
                  t.v["term"], t.v["output_fraction"], cached=t.v["cached_input_fraction"],
                  cached_price=CHAPTER["gpt-4o"][0]), None)],
    "cap-1": [("one too many", lambda t, ref: ref + 1, "off by one")],
    "cap-2": [("fp16 cache", lambda t, ref: derive(dataclasses.replace(sound_plan(), context_len=t.v["context_len"]))
               .concurrency, None)],
    "cap-3": [("a percentage", lambda t, ref: ref * 100, "percentage")],
    "cap-4": [("one degree short", lambda t, ref: ref / 2, None)],
    "cap-5": [("tokens for billions", lambda t, ref: ref * 1e9, None)],
    "cap-7": [("a fraction", lambda t, ref: ref / 100, "percentage"),
              ("100 u* (the break-even as the percentile)", lambda t, ref: 100 - ref, None),
              ("the median", lambda t, ref: 50.0, None)],
    "cap-6": [("one too few", lambda t, ref: ref - 1, "off by one")],
    "quant-1": [("no scale or zero point", lambda t, ref: t.v["bits"] / 8, None),
                ("no zero point", lambda t, ref: t.v["bits"] / 8 + 2 / t.v["group_size"], None),
                ("bits for bytes", lambda t, ref: ref * 8, "8x too large: bits")],
    "quant-2": [("the embedding table quantized too", lambda t, ref: _quant2(t, embedding_quantized=True), None),
                ("GB for GiB", lambda t, ref: ref * GiB / 1e9, "GB (10^9 bytes) where GiB")],
    "quant-3": [("fp16 cache", lambda t, ref: _quant3(t, kv_bytes=2), None),
                ("no reserve", lambda t, ref: _quant3(t, reserve=1.0), None),
                ("one too many", lambda t, ref: ref + 1, "off by one")],
    "quant-4": [("one degree short", lambda t, ref: ref / 2, None)],
    "quant-5": [("an ideal kernel", lambda t, ref: _quant5(t, ratio=1.0), None),
                ("the bit ratio", lambda t, ref: 16 / get_precision(t.v["weights"]).bits, None)],
    "quant-6": [("a batch of 64 that does not fit", lambda t, ref: ref if _quant6(t, capped=False) == _quant6(t)
                 else _quant6(t, capped=False), None),
                ("an ideal kernel", lambda t, ref: _quant6(t, ratio=1.0), None),
                ("per 1k tokens", lambda t, ref: ref / 1000, "1000x too small")],
    "spec-1": [("k + 1 tokens", lambda t, ref: t.v["draft_len"] + 1, None),
               ("no token of the target's own", lambda t, ref: ref - 1, None),
               ("k terms, not k + 1", lambda t, ref: ref - t.v["acceptance_rate"] ** t.v["draft_len"], None)],
    "spec-2": [("the draft for free", lambda t, ref: _spec_batch1(t, draft_free=True), None),
               ("k + 1 tokens a round", lambda t, ref: _spec_batch1(t, tokens=t.v["draft_len"] + 1), None),
               ("verification at k + 1 steps", lambda t, ref: _spec_batch1(t, verify_steps=t.v["draft_len"] + 1),
                None)],
    "spec-3": [("the closed form", lambda t, ref: round(REGISTRY["spec-4"].reference(
                   acceptance_rate=t.v["acceptance_rate"], draft_len=t.v["draft_len"])), None),
               ("attention left out", lambda t, ref: _spec_scan(t, attention=False), None),
               ("one too many", lambda t, ref: ref + 1, "off by one")],
    "spec-4": [("k for k + 1", lambda t, ref: _spec4(t, k_for_k_plus_1=True), None),
               ("the draft for free", lambda t, ref: _spec4(t, draft_free=True), None)],
    "spec-5": [("the draft for free", lambda t, ref: _spec5(t, draft_free=True), None)],
    "spec-6": [("the longest draft", lambda t, ref: 10, None),
               ("one too many", lambda t, ref: ref + 1, "off by one")],
    "dis-1": [("the sum bound", lambda t, ref: _dis1(t, serial=True), None),
              ("the prefill alone over the decode step", lambda t, ref: _mixed(
                  t, t.v["tp_degree"], 0, 1, t.v["prompt_len"]) / _mixed(
                  t, t.v["tp_degree"], t.v["decode_batch"], t.v["context_len"], 0), None)],
    "dis-2": [("the ridge point less the batch", lambda t, ref: 989.5 / 3.35 - t.v["decode_batch"], None)],
    "dis-3": [("the whole cache from every device", lambda t, ref: (ref - 0.02) * t.v["tp_degree"] + 0.02, None),
              ("K or V only", lambda t, ref: (ref - 0.02) / 2 + 0.02, None)],
    "dis-4": [("chunks of max_batched_tokens", lambda t, ref: _dis4(t, chunk_without_decodes=True), None),
              ("the whole prompt in one step", lambda t, ref: _mixed(
                  t, 8, t.v["decode_batch"], 4096, t.v["prompt_len"]) * 1e3, None)],
    "dis-5": [("the average load", lambda t, ref: math.ceil(t.v["rate_per_s"] * t.v["prefill_ms"] / 1e3), None),
              ("one too few", lambda t, ref: ref - 1, "off by one")],
    "dis-6": [("per 1M output tokens", lambda t, ref: _dis6(t, per_output_token=True), None),
              ("per 1k tokens", lambda t, ref: ref / 1000, "1000x too small")],
}

CASES = [(ex_id, v) for ex_id in sorted(REGISTRY) for v in all_variants(REGISTRY[ex_id])]


def test_every_exercise_has_a_worked_answer_and_slips():
    missing = sorted(set(REGISTRY) - set(HAND)) + sorted(set(REGISTRY) - set(SLIPS))
    assert not missing, f"exercises without a worked answer or slips in this test: {missing}"


@pytest.mark.parametrize("ex_id", sorted(HAND))
def test_hand_answers_pass_and_slips_fail_in_every_variant(ex_id):
    ex = REGISTRY[ex_id]
    for given in all_variants(ex):
        t = Shown(ex, given)
        ref = ex.reference(**t.v)
        hand = HAND[ex_id](t)
        ok, message = compare(ex, ref, hand)
        assert ok, f"{ex_id} {given}: the worked answer {hand!r} is refused ({message}); reference {ref!r}"
        for name, slip, hint in SLIPS[ex_id]:
            wrong = slip(t, ref)
            if math.isclose(wrong, ref, rel_tol=1e-9):
                continue  # this variant cannot show that slip (an MHA model has no GQA group)
            ok, message = compare(ex, ref, wrong)
            assert not ok, f"{ex_id} {given}: the slip '{name}' ({wrong!r}) passes; reference {ref!r}"
            hint = hint(t) if callable(hint) else hint
            if hint:
                assert hint in message, f"{ex_id} {given}: the slip '{name}' gets no '{hint}' hint: {message}"
