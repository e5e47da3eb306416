"""The book's example plans: a sound one, one per beginner mistake, one per war story.

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

from ..memory import kv_bytes_per_token
from ..models import get_model
from .plan import CapacityPlan, plan_to_toml


def sound_plan() -> CapacityPlan:
    """The capstone's plan: a 70B GQA model (70e9 parameters, fp16) on one 8 x H100 SXM node.

    TP=8 because the node must hold at least 160 conversations of 8,192 tokens at once (TP=4
    holds 136 over two replicas); a 10% working reserve; continuous batching, admission on
    the final length, oversize requests rejected, one deployment per tier. The audit finds
    nothing in it.
    """
    return CapacityPlan(
        name="sound",
        description="70B GQA on 8 x H100 SXM: the worked plan of the capstone",
        model="llama-3-70b", n_params=70e9, gpu="h100-sxm", n_gpus=8, tp_degree=8,
        context_len=8192, reserve_fraction=0.10, target_concurrency=160,
        prompt_len=2048, max_batch=256,
        claimed_kv_bytes_per_token=327_680, claimed_concurrency=183,
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
            s, "concurrency-from-flops", "8 x 989 TFLOP/s / (140 GFLOP per token x 20 tokens/s) = 2,800 users",
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
        "max-tp-degree": _with(
            s, "max-tp-degree", "TP=8 for a target that TP=2 meets", target_concurrency=30),
        "shared-interactive-batch": _with(
            s, "shared-interactive-batch", "chat and overnight batch on one endpoint", shared_tiers=True),
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
        WarStory("shared-deployment", "The shared deployment", _with(
            s, "shared-deployment", "interactive chat and overnight batch on one endpoint",
            shared_tiers=True), ("shared-interactive-batch",)),
    )


def all_plans() -> dict[str, CapacityPlan]:
    """Every example plan by file stem: ``sound``, ``mistake-<code>``, ``story-<slug>``."""
    plans = {"sound": sound_plan()}
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
