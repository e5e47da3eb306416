"""Exercises of the chapter "What good sounds like" (notebooks/11_capstone.ipynb)."""
import dataclasses

from ..audit import audit, derive, right_tp_degree
from ..audit.examples import sound_plan
from .registry import exercise


@exercise("cap-1", rtol=0, unit="conversations")
def _concurrency_at_16k():
    return derive(dataclasses.replace(sound_plan(), context_len=16_384)).concurrency


@exercise("cap-2", rtol=0, unit="conversations")
def _concurrency_fp8_cache():
    return derive(dataclasses.replace(sound_plan(), kv_bytes_per_elem=1)).concurrency


@exercise("cap-3", rtol=0.01, unit="(fraction)")
def _break_even_at_30_percent_output():
    return derive(dataclasses.replace(sound_plan(), output_fraction=0.30)).break_even_utilization


@exercise("cap-4", rtol=0, unit="GPUs")
def _tp_for_100_conversations():
    return right_tp_degree(dataclasses.replace(sound_plan(), target_concurrency=100))


@exercise("cap-5", rtol=0.01, unit="B tokens/month")
def _crossover_with_one_engineer():
    return derive(dataclasses.replace(sound_plan(), engineering_fte=1)).crossover_tokens_per_month / 1e9


@exercise("cap-6", rtol=0, unit="mistakes")
def _mistakes_in_a_plan():
    plan = dataclasses.replace(sound_plan(), admission="prompt", shared_tiers=True, batching="static",
                               claimed_concurrency=203)
    return len(audit(plan))


@exercise("cap-7", rtol=0.05, unit="percentile")
def _cheapest_floor_percentile_of_the_plan(output_fraction=0.25):
    return derive(dataclasses.replace(sound_plan(), output_fraction=output_fraction)).cheapest_floor_percentile
