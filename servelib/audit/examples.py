"""The book's example plans: a sound one, a mixture of experts and a sliding-window model
(both sound), one per beginner mistake, one per war story.

Every plan is built in code from :func:`sound_plan`, so a notebook on Colab needs no file;
the repository's ``plans/*.toml`` are these plans written out by::

    python -m servelib.audit.examples plans/

and a test checks that the files and the definitions agree.
"""
from __future__ import annotations

import dataclasses
import pathlib
import sys
from dataclasses import dataclass

from ..economics import GPT_4O, H100_USD_PER_GPU_HOUR, MINUTES_PER_MONTH, ptu_capacity_tokens_per_month
from ..memory import kv_bytes_per_token
from ..models import _CONFIGS, get_model
from .plan import CapacityPlan, plan_to_toml


def sound_plan() -> CapacityPlan:
    """The capstone's plan: a 70B GQA model (70e9 parameters, fp16) on one 8 x H100 SXM node.

    TP=8 because the node must hold at least 160 conversations of 8,192 tokens at once (TP=4
    holds 136 over two replicas); a 10% working reserve; continuous batching, admission on
    the final length, oversize requests rejected, one deployment per tier. The money side
    uses the economics chapter's scenario: gpt-4o list prices, a quarter of the tokens
    output, 5.75 B tokens a month; a dedicated commitment of $13,140 a month for 120,000
    tokens/min counted in tokens of any kind, its break-even (57%) quoted with the
    workload's mix, and the dedicated floor sized at the (1 - u*) quantile of demand, p43;
    a self-hosting case at $2.50 per H100-hour that counts a quarter of an engineer
    ($180,000 a year). The audit finds nothing in it.
    """
    return CapacityPlan(
        name="sound",
        description="70B GQA on 8 x H100 SXM: the worked plan of the capstone",
        model="llama-3-70b", n_params=70e9, gpu="h100-sxm", n_gpus=8, tp_degree=8,
        context_len=8192, reserve_fraction=0.10, target_concurrency=160,
        prompt_len=2048, max_batch=256,
        claimed_kv_bytes_per_token=327_680, claimed_concurrency=183,
        output_fraction=0.25, monthly_tokens=5.75e9,
        usd_per_1k_input=GPT_4O.usd_per_1k_input, usd_per_1k_output=GPT_4O.usd_per_1k_output,
        monthly_commitment_usd=13_140, capacity_tokens_per_month=120_000 * MINUTES_PER_MONTH,
        claimed_break_even_utilization=0.57, break_even_output_fraction=0.25, floor_percentile=43,
        cost_lines=("gpu-hours", "engineering"), gpu_usd_per_hour=H100_USD_PER_GPU_HOUR,
        engineering_fte=0.25, usd_per_fte_year=180_000,
    )


def _with(plan: CapacityPlan, name: str, description: str, **changes) -> CapacityPlan:
    return dataclasses.replace(plan, name=name, description=description, **changes)


def mistake_plans() -> dict[str, CapacityPlan]:
    """One plan per audit code: :func:`sound_plan` with exactly that mistake made in it."""
    s = sound_plan()
    m = get_model(s.model)
    kv_right = kv_bytes_per_token(m)
    kv_heads_slip = kv_bytes_per_token(dataclasses.replace(m, n_kv_heads=m.n_heads))
    return {
        "concurrency-from-flops": _with(
            s, "concurrency-from-flops", "8 x 989 TFLOP/s / (140 GFLOP per token x 20 tokens/s) = 2,800 concurrent sequences",
            claimed_concurrency=2800, concurrency_basis="flops"),
        "attention-heads-for-kv": _with(
            s, "attention-heads-for-kv", "64 attention heads put in the KV formula",
            claimed_kv_bytes_per_token=kv_heads_slip, claimed_concurrency=22),
        "no-working-reserve": _with(
            s, "no-working-reserve", "every byte after the weights given to the KV cache",
            reserve_fraction=0.0, claimed_concurrency=203),
        "weights-exceed-device": _with(
            s, "weights-exceed-device", "eight independent replicas, one card each",
            tp_degree=1, target_concurrency=1, claimed_concurrency=None),
        "batch1-benchmark": _with(
            s, "batch1-benchmark", "decode benchmarked one request at a time", benchmark_batch=1),
        "static-batching-uneven-outputs": _with(
            s, "static-batching-uneven-outputs", "static batches of chat replies of any length",
            batching="static"),
        "admit-on-prompt-length": _with(
            s, "admit-on-prompt-length", "admission budgets the prompt only", admission="prompt"),
        "queue-never-fits": _with(
            s, "queue-never-fits", "requests too long for the budget wait in the queue",
            oversize_requests="queue"),
        "ptu-break-even-without-mix": _with(
            s, "ptu-break-even-without-mix", "a 40% break-even quoted with no output mix",
            claimed_break_even_utilization=0.40, break_even_output_fraction=None),
        "tokens-per-ptu-constant": _with(
            s, "tokens-per-ptu-constant", "48 PTUs x 2,500 tokens/min, whatever the mix",
            n_ptu=48, capacity_estimate="constant",
            capacity_tokens_per_month=ptu_capacity_tokens_per_month(48, 0.0)),
        "floor-sized-to-peak": _with(
            s, "floor-sized-to-peak", "the commitment covers the busiest minute of the month",
            floor_percentile=100, monthly_tokens=0.22 * 120_000 * MINUTES_PER_MONTH),
        "self-hosting-gpu-hours-only": _with(
            s, "self-hosting-gpu-hours-only", "the business case counts GPU hours only",
            cost_lines=("gpu-hours",)),
        "max-tp-degree": _with(
            s, "max-tp-degree", "TP=8 for a target that TP=2 meets", target_concurrency=30),
        "shared-interactive-batch": _with(
            s, "shared-interactive-batch", "chat and overnight batch on one endpoint", shared_tiers=True),
        "quantization-speedup-from-bytes": _with(
            s, "quantization-speedup-from-bytes", "int4 weights are a quarter of the bytes, so four times the tokens",
            quantize_weights="int4-g32", claimed_quantized_speedup=4.0),
        "speculative-at-large-batch": _with(
            s, "speculative-at-large-batch", "a Llama-3-8B draft at every batch size",
            draft_model="llama-3-8b", draft_len=4, acceptance_rate=0.5),
        "one-pool-tight-slos": _with(
            s, "one-pool-tight-slos", "chat held to 30 ms a token on one pool that prefills whole prompts",
            ttft_slo_s=0.5, tpot_slo_s=0.03),
        "target-concurrency-unmet": _with(
            s, "target-concurrency-unmet", "200 conversations of 8,192 tokens asked of a node that holds 183",
            target_concurrency=200),
        "slo-below-roofline": _with(
            s, "slo-below-roofline", "chat held to 20 ms a token at a batch whose decode step takes longer",
            ttft_slo_s=0.5, tpot_slo_s=0.02),
        "token-budget-below-batch": _with(
            s, "token-budget-below-batch", "chunked prefill at 128 tokens a step for batches of 256",
            max_batched_tokens=128),
        "claimed-number-wrong": _with(
            s, "claimed-number-wrong", "KV per token counted for K only",
            claimed_kv_bytes_per_token=kv_right / 2),
    }


@dataclass(frozen=True)
class WarStory:
    """A war story of the syllabus as a plan: ``slug`` (file name), ``title``, the plan, and
    ``expected``, the codes the audit must find in it."""

    slug: str
    title: str
    plan: CapacityPlan
    expected: tuple


def war_stories() -> tuple[WarStory, ...]:
    """The syllabus's six war stories, each as the plan that led to it."""
    s = sound_plan()
    return (
        WarStory("gpus-too-slow", "The GPUs are too slow", _with(
            s, "gpus-too-slow", "self-hosted, one request at a time; the proposal was to double the fleet",
            max_batch=1, benchmark_batch=1), ("batch1-benchmark",)),
        WarStory("oom-at-3am", "The batch that OOMed at 3 a.m.", _with(
            s, "oom-at-3am", "admission budgeted the prompt; the OOM killed the in-flight batch",
            admission="prompt"), ("admit-on-prompt-length",)),
        WarStory("ptu-sized-to-peak", "The PTU commitment sized to peak", _with(
            s, "ptu-sized-to-peak", "a year of capacity sized to the peak, 22% used; nobody computed "
            "the break-even or asked for the mix", floor_percentile=100, monthly_tokens=0.22 * 120_000
            * MINUTES_PER_MONTH, claimed_break_even_utilization=None, break_even_output_fraction=None),
            ("floor-sized-to-peak",)),
        WarStory("break-even-moved", "The break-even that moved", _with(
            s, "break-even-moved", "40% break-even at a 50% output mix on capacity counted in tokens; "
            "agents stuffed retrieved context into prompts and the mix fell to 10%", output_fraction=0.10,
            claimed_break_even_utilization=0.40, break_even_output_fraction=0.50),
            ("ptu-break-even-without-mix",)),
        WarStory("self-hosting-won-then-lost", "The self-hosting case that won and then lost", _with(
            s, "self-hosting-won-then-lost", "the case counted GPU hours; eighteen months later two "
            "engineers ran inference full time", monthly_tokens=6e9, cost_lines=("gpu-hours",),
            engineering_fte=2), ("self-hosting-gpu-hours-only",)),
        WarStory("shared-deployment", "The shared deployment", _with(
            s, "shared-deployment", "interactive chat and overnight batch on one endpoint",
            shared_tiers=True), ("shared-interactive-batch",)),
    )


def moe_plan() -> CapacityPlan:
    """A sound plan for a mixture of experts: Qwen3-30B-A3B (preset) on one H100 SXM.

    All 128 experts of every layer must be resident (30.5e9 parameters, 57 GiB in bf16),
    but a decode step reads only the experts its batch routes to; 27 conversations of
    8,192 tokens fit after the weights and a 10% reserve. The audit finds nothing in it.
    """
    return CapacityPlan(
        name="moe", description="Qwen3-30B-A3B (128 experts, 8 per token) on one H100 SXM",
        model="qwen3-30b-a3b", gpu="h100-sxm", n_gpus=1, tp_degree=1, context_len=8192,
        reserve_fraction=0.10, target_concurrency=24, prompt_len=2048, max_batch=27,
        claimed_kv_bytes_per_token=98_304, claimed_concurrency=27)


def sliding_window_plan() -> CapacityPlan:
    """A sound plan for a model with sliding-window layers: gpt-oss-20b, its config.json fields
    inline in the plan, on one H100 SXM at 131,072-token contexts.

    Half its layers keep only the last 128 tokens, so a sequence holds 3,075 MiB, not the
    6,144 MiB that every layer at full length would: 12 conversations fit. The audit finds
    nothing in it.
    """
    return CapacityPlan(
        name="sliding-window", description="gpt-oss-20b (12 windowed + 12 full layers) on one H100 SXM",
        model="gpt-oss-20b", model_config=dict(_CONFIGS["gpt-oss-20b"]), gpu="h100-sxm", n_gpus=1,
        tp_degree=1, context_len=131_072, reserve_fraction=0.10, target_concurrency=12,
        prompt_len=8192, max_batch=12, claimed_kv_bytes_per_token=24_576, claimed_concurrency=12)


def all_plans() -> dict[str, CapacityPlan]:
    """Every example plan by file stem: ``sound``, ``moe``, ``sliding-window``,
    ``mistake-<code>``, ``story-<slug>``."""
    plans = {"sound": sound_plan(), "moe": moe_plan(), "sliding-window": sliding_window_plan()}
    plans.update({f"mistake-{code}": p for code, p in mistake_plans().items()})
    plans.update({f"story-{w.slug}": w.plan for w in war_stories()})
    return plans


def write_plans(directory) -> list[pathlib.Path]:
    """Write every example plan as ``<stem>.toml`` into ``directory``; return the paths."""
    d = pathlib.Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for stem, plan in all_plans().items():
        p = d / f"{stem}.toml"
        p.write_text(plan_to_toml(plan))
        paths.append(p)
    return paths


if __name__ == "__main__":
    for path in write_plans(sys.argv[1] if len(sys.argv) > 1 else "plans"):
        print(path)
