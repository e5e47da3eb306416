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
from servelib.economics import replica_throughput, spillover_cost
from servelib.economics.scenarios import SELF_HOST, trace
from servelib.economics.spillover import floor_at_percentile
from servelib.grading import REGISTRY
from servelib.grading.check import compare
from servelib.grading.variants import GPUFacts, ModelFacts, all_variants, inputs_for, render
from servelib.hardware import get_gpu
from servelib.models import get_model
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


def _self_host(t):
    """The self-hosted deployment as an ec-9 statement prints it, and its hosted price."""
    sh = dataclasses.replace(SELF_HOST, usd_per_gpu_hour=t(f"{t.v['usd_per_gpu_hour']:.2f}"),
                             usd_per_engineer_year=t(180_000), batch=int(t(64)), context_len=int(t(4096)))
    hosted = dataclasses.replace(SELF_HOST.hosted, usd_per_1k_input=t("0.90") / 1000,
                                 usd_per_1k_output=t("0.90") / 1000)
    return sh, hosted


HAND = {
    "pd-1": lambda t: 2 * t(t["model"].billions) * 1e9 * t(t.v["prompt_len"]) / 1e12,
    "pd-2": lambda t: 1e3 * _ttft(CHAPTER["p8b"], CHAPTER["kv8b"], t(t.v["prompt_len"]),
                                  t(t["gpu"].bf16_tflops) * 1e12, t(t["gpu"].tb_per_s) * 1e12),
    "pd-3": lambda t: 1e3 * _tpot(CHAPTER["p8b"], CHAPTER["kv8b"] * t(t.v["context_len"]), 1,
                                  get_gpu(t.v["gpu"]).peak_flops("bf16"), t(t["gpu"].gb_per_s) * 1e9),
    "pd-4": lambda t: _ttft(CHAPTER["p8b"], CHAPTER["kv8b"], t(t.v["prompt_len"]), _gpu(t).peak_flops("bf16"),
                            _gpu(t).hbm_bandwidth_Bps)
    / _tpot(CHAPTER["p8b"], CHAPTER["kv8b"] * t.v["prompt_len"], 1, _gpu(t).peak_flops("bf16"),
            _gpu(t).hbm_bandwidth_Bps),
    "pd-5": lambda t: (2 * t(t["model"].n_layers) * t(t["model"].n_heads) * t(t["model"].head_dim)
                       * t(t.v["prompt_len"]) * (t.v["prompt_len"] + 1))
    / (2 * t(t["model"].billions) * 1e9 * t.v["prompt_len"]),
    "pd-6": lambda t: (_ttft(CHAPTER["p8b"], CHAPTER["kv8b"], t(t.v["prompt_len"]), t(t["gpu"].bf16_tflops) * 1e12,
                             t(t["gpu"].gb_per_s) * 1e9)
                       + t(t.v["output_len"] - 1) * _tpot(CHAPTER["p8b"], CHAPTER["kv8b"] * t(t.v["prompt_len"]
                                                          + t.v["output_len"]), 1, t(t["gpu"].bf16_tflops) * 1e12,
                                                          t(t["gpu"].gb_per_s) * 1e9)),
    "rl-1": lambda t: t(t["gpu"].bf16_tflops) * 1e12 / (t(t["gpu"].gb_per_s) * 1e9),
    "rl-2": lambda t: t(f"{get_gpu('t4').flops[t.v['dtype']] / 1e12:g}") * 1e12 / (t("320") * 1e9),
    "rl-3": lambda t: 2 * t(t["model"].billions) / (2 * t(t["model"].billions) + t(t.v["context_len"])
                                                    * t(t["model"].kv_kib_per_token) * 1024 / 1e9),
    "rl-4": lambda t: min(1, 2 * t("8.03") / (2 * t("8.03") + t(t.v["context_len"]) * t("128") * 1024 / 1e9)
                          / (t(t["gpu"].bf16_tflops) * 1e12 / (t(t["gpu"].gb_per_s) * 1e9))),
    "rl-5": lambda t: min(t(t["gpu"].bf16_tflops), t(t.v["intensity"]) * t(t["gpu"].tb_per_s)),
    "rl-6": lambda t: (t(64) * _tpot(CHAPTER["p70b"] / 2, CHAPTER["kv70b"] / 2 * t(2048), 1, 989.5e12, 3.35e12)
                       / _tpot(CHAPTER["p70b"] / 2, CHAPTER["kv70b"] / 2 * 2048, 64, 989.5e12, 3.35e12)),
    "kv-1": lambda t: 2 * t(t["model"].n_layers) * t(t["model"].n_kv_heads) * t(t["model"].head_dim)
    * {"fp16": 2, "fp8": 1}[t.v["kv_dtype"]],
    "kv-2": lambda t: 2 * t(t["model"].n_layers) * t(t["model"].n_kv_heads) * t(t["model"].head_dim) * 2
    * t(t.v["context_len"]) / GiB,
    "kv-3": lambda t: math.floor((t(t["gpu"].memory_gib) * GiB - 2 * t("6.74") * 1e9) * 0.9
                                 / (2 * 32 * 32 * 128 * 2 * t(t.v["context_len"]))),
    "kv-4": lambda t: math.floor((t(t["gpu"].memory_gib) * GiB - 2 * t("7.62") * 1e9) * 0.9
                                 / (2 * 28 * 4 * 128 * 1 * t(t.v["context_len"]))),
    "kv-5": lambda t: _min_tp(t(t["gpu"].memory_gib), t("70.55") * 1e9, CHAPTER["kv70b"], t(t.v["context_len"])),
    "kv-6": lambda t: (math.floor((t.v["n_gpus"] * 80 * GiB - 2 * 70e9) * 0.9 / (CHAPTER["kv70b"] * t.v["context_len"]))
                       - math.floor((t.v["n_gpus"] * 80 * GiB * 0.9 - 2 * 70e9) / (CHAPTER["kv70b"] * t.v["context_len"]))),
    "kv-7": lambda t: _kv7(t),
    "bt-1": lambda t: (2 * t(t["model"].billions) * 1e9 + t(t.v["batch"]) * t(t.v["context_len"])
                       * t(t["model"].kv_kib_per_token) * 1024) / 1e9,
    "bt-2": lambda t: math.ceil(
        (r := t(t["gpu"].bf16_tflops) / t(t["gpu"].tb_per_s)) * 2 * t(t["model"].billions) * 1e9
        / (2 * t(t["model"].billions) * 1e9 - r * t(t.v["context_len"]) * t(t["model"].kv_kib_per_token) * 1024)),
    "bt-3": lambda t: 2 * t(t["model"].billions) * 1e9 / (t(t.v["context_len"]) * t(t["model"].kv_kib_per_token) * 1024),
    "bt-4": lambda t: _min_tp(t(t["gpu"].memory_gib), CHAPTER["p70b"], CHAPTER["kv70b"], t(t.v["context_len"])),
    "bt-5": lambda t: (8 // t.v["tp_degree"]) * math.floor(
        (80 * GiB - 2 * CHAPTER["p70b"] / t.v["tp_degree"]) * 0.9
        / (CHAPTER["kv70b"] / t.v["tp_degree"] * t.v["context_len"])),
    "bt-6": lambda t: t(t.v["batch"]) / _tpot(CHAPTER["p8b"], CHAPTER["kv8b"] * t(t.v["context_len"]), t.v["batch"],
                                              _gpu(t).peak_flops("bf16"), _gpu(t).hbm_bandwidth_Bps),
    "sch-1": lambda t: _continuous(t.v["outputs"], 2) * t(t.v["step_ms"]) / 1e3,
    "sch-2": lambda t: (simulate(policy="static", **(kw := workloads.uneven_outputs(seed=int(t(t.v["seed"])))))
                        .makespan_s / simulate(policy="continuous", **kw).makespan_s),
    "sch-3": lambda t: t(t.v["kv_tokens"]) // (t(t.v["prompt_len"]) + t(t.v["max_output_len"])),
    "sch-4": lambda t: 4 * ((t(t.v["cache_tokens"]) - 4 * t(t.v["prompt_len"] + 1)) // 4 + 1),
    "sch-5": lambda t: math.ceil(t(t.v["tokens"]) / t(t.v["block_size"])) * t.v["block_size"] - t.v["tokens"],
    "sch-6": lambda t: math.ceil(t(t.v["prompt_len"]) / (t(t.v["max_batched_tokens"]) - 1)) * t(t.v["step_ms"]) / 1e3,
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
    "rl-3": [("KV left out", lambda t, ref: 1.0, None), ("2 FLOPs per byte", lambda t, ref: 2 * ref, "2x too large")],
    "rl-4": [("a percentage", lambda t, ref: ref * 100, "percentage")],
    "rl-5": [("no roof", lambda t, ref: t.v["intensity"] * _gpu(t).hbm_bandwidth_Bps / 1e12 * 1.5, None),
             ("GFLOP/s", lambda t, ref: ref * 1000, "1000x too large")],
    "rl-6": [("batch 64 read as 64x", lambda t, ref: 64, None)],
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
    "bt-2": [("one too few", lambda t, ref: ref - 1, "off by one")],
    "bt-3": [("forgot the 2 of 2P", lambda t, ref: ref / 2, "2x too small")],
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
