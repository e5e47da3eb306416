"""The quantization, speculative-decoding and disaggregation exercises: the book's answers,
variants by keyword, and deployments that fit."""
import pytest

from servelib.grading import REGISTRY
from servelib.grading.variants import all_variants, inputs_for
from servelib.memory import capacity
from servelib.models import get_model
from servelib.speculative import speculative_concurrency

BOOK = {"quant-1": 0.625, "quant-3": 20, "quant-4": 4, "spec-1": 2.94117, "spec-3": 194, "spec-4": 172.05,
        "spec-5": 0.7237, "spec-6": 5}


@pytest.mark.parametrize("ex_id", sorted(BOOK))
def test_book_answers(ex_id):
    assert REGISTRY[ex_id].reference() == pytest.approx(BOOK[ex_id], rel=1e-4)


@pytest.mark.parametrize("ex_id, kwargs, expected", [
    ("quant-1", dict(bits=4, group_size=128, zero_bits=4), 0.51953125),   # the AWQ layout
    ("quant-3", dict(kv="bf16"), 10),
    ("quant-4", dict(weights="bf16", kv="bf16"), 8),
    ("spec-1", dict(acceptance_rate=0.5, draft_len=2), 1.75),
    ("spec-3", dict(acceptance_rate=0.6), 114),
])
def test_variants_take_keyword_inputs(ex_id, kwargs, expected):
    assert REGISTRY[ex_id].reference(**kwargs) == pytest.approx(expected)


def test_every_new_exercise_is_registered():
    assert {f"quant-{i}" for i in range(1, 7)} | {f"spec-{i}" for i in range(1, 7)} <= set(REGISTRY)


def test_the_deployments_of_every_variant_fit_in_memory():
    """A statement that describes a deployment describes one that fits: the draft's weights
    and cache beside the target's (spec-*), the decoding batch and the prompt beside it (dis-*)."""
    target, draft = get_model("llama-3-70b"), get_model("llama-3-8b")
    for ex_id in ("spec-2", "spec-3", "spec-6"):
        ex = REGISTRY[ex_id]
        for given in all_variants(ex):
            v = inputs_for(ex, given)
            batch = ex.reference(**v) if ex_id == "spec-3" else 1
            fits = speculative_concurrency(target, draft, "h100-sxm", context_len=v["context_len"] + 16, tp_degree=8)
            assert batch <= fits, (ex_id, given, batch, fits)
    for ex_id in ("dis-1", "dis-2", "dis-4"):
        ex = REGISTRY[ex_id]
        for given in all_variants(ex):
            v = inputs_for(ex, given)
            cap = capacity(target, "h100-sxm", n_gpus=v["tp_degree"], context_len=v["context_len"],
                           tp_degree=v["tp_degree"])
            kv_tokens = cap.kv_budget_bytes_per_device // cap.kv_bytes_per_token_per_device
            held = v["decode_batch"] * (v["context_len"] + 1) + v.get("prompt_len", 0)
            assert held <= kv_tokens, (ex_id, given, held, kv_tokens)
