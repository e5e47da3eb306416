"""Exercises of the chapter "What good sounds like" (notebooks/11_capstone.ipynb)."""
import dataclasses

from ..audit import audit, derive, right_tp_degree
from ..audit.examples import sound_plan
from .registry import exercise

_CONTEXTS = (4096, 8192, 12_288, 16_384, 24_576, 32_768)


@exercise("cap-1", rtol=0, unit="conversations", vary={"context_len": _CONTEXTS},
          text="**cap-1.** How many conversations of {context_len:,} tokens does the node hold at once?")
def _concurrency_at_context(context_len=16_384):
    return derive(dataclasses.replace(sound_plan(), context_len=context_len)).concurrency


def _cap2_text(context_len):
    where = "Back at 8,192 tokens" if context_len == 8192 else f"At {context_len:,} tokens"
    return (f"**cap-2.** {where}, the engine stores the KV cache in fp8 (1 byte per element; weights stay "
            f"fp16). How many conversations fit?")


@exercise("cap-2", rtol=0, unit="conversations", vary={"context_len": _CONTEXTS}, text=_cap2_text)
def _concurrency_fp8_cache(context_len=8192):
    return derive(dataclasses.replace(sound_plan(), kv_bytes_per_elem=1, context_len=context_len)).concurrency


@exercise("cap-3", rtol=0.01, unit="(fraction)", vary={"output_fraction": (0.1, 0.15, 0.2, 0.3, 0.35, 0.4, 0.5)},
          text="**cap-3.** The workload's output fraction becomes {output_fraction:.0%}. What is the "
               "commitment's break-even utilisation (a fraction), its capacity counted in tokens as in the plan?")
def _break_even_at_mix(output_fraction=0.30):
    return derive(dataclasses.replace(sound_plan(), output_fraction=output_fraction)).break_even_utilization


@exercise("cap-4", rtol=0, unit="GPUs", vary={"target": tuple(range(20, 181, 20))},
          text="**cap-4.** The node only needs to hold {target} conversations of 8,192 tokens at once. What is "
               "the smallest TP degree (dividing 8) whose replicas together hold them?")
def _tp_for_target(target=100):
    return right_tp_degree(dataclasses.replace(sound_plan(), target_concurrency=target))


_FTE = {0.5: "half an engineer", 1: "one full engineer", 1.5: "one and a half engineers", 2: "two engineers",
        3: "three engineers"}


@exercise("cap-5", rtol=0.01, unit="B tokens/month", vary={"engineering_fte": tuple(_FTE)},
          text=lambda engineering_fte: (f"**cap-5.** Inference operations take {_FTE[engineering_fte]} instead "
                                        f"of a quarter. Where does self-hosting cross over pay-as-you-go now, "
                                        f"in billions of tokens a month?"))
def _crossover_with_engineers(engineering_fte=1):
    return derive(dataclasses.replace(sound_plan(), engineering_fte=engineering_fte)).crossover_tokens_per_month / 1e9


@exercise("cap-6", rtol=0, unit="mistakes", vary={"claimed": (150, 183, 190, 203, 250)},
          text="**cap-6.** A plan claims {claimed} conversations (with the 10% reserve in its inputs), admits "
               "on the prompt length, runs static batches of chat replies of any length, and shares one "
               "endpoint between chat and overnight batch. How many distinct mistakes does it contain?")
def _mistakes_in_a_plan(claimed=203):
    plan = dataclasses.replace(sound_plan(), admission="prompt", shared_tiers=True, batching="static",
                               claimed_concurrency=claimed)
    return len(audit(plan))


def _cap7_text(output_fraction):
    where = "Back at" if output_fraction == 0.25 else "At"
    return (f"**cap-7.** {where} a {output_fraction:.0%} output mix: at which percentile of demand does the "
            f"cheapest dedicated floor of the plan's capacity sit, overflow spilled to pay-as-you-go?")


# A percentile is read off rounded to a whole number (p43 for 42.86): 2% takes that and still
# refuses the median (p50) and 100 u*. A 35% mix is left out: its floor (p51.2) lies within 2.5%
# of the median, too close to tell the slip from a rounded answer.
@exercise("cap-7", rtol=0.02, unit="percentile",
          vary={"output_fraction": (0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.45, 0.5)}, text=_cap7_text)
def _cheapest_floor_percentile_of_the_plan(output_fraction=0.25):
    return derive(dataclasses.replace(sound_plan(), output_fraction=output_fraction)).cheapest_floor_percentile
