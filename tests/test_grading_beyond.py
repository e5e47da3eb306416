"""The quantization and speculative-decoding exercises: the book's answers, and variants by keyword."""
import pytest

from servelib.grading import REGISTRY

BOOK = {"quant-1": 0.625, "quant-3": 20, "quant-4": 4, "spec-1": 2.94117, "spec-3": 194, "spec-4": 172.05,
        "spec-5": 0.7237, "spec-6": 5}


@pytest.mark.parametrize("ex_id", sorted(BOOK))
def test_book_answers(ex_id):
    assert REGISTRY[ex_id].reference() == pytest.approx(BOOK[ex_id], rel=1e-4)


@pytest.mark.parametrize("ex_id, kwargs, expected", [
    ("quant-1", dict(weights="int4-g128"), 0.51953125),
    ("quant-3", dict(kv="bf16"), 10),
    ("quant-4", dict(weights="bf16", kv="bf16"), 8),
    ("spec-1", dict(acceptance_rate=0.5, draft_len=2), 1.75),
    ("spec-3", dict(acceptance_rate=0.6), 114),
])
def test_variants_take_keyword_inputs(ex_id, kwargs, expected):
    assert REGISTRY[ex_id].reference(**kwargs) == pytest.approx(expected)


def test_every_new_exercise_is_registered():
    assert {f"quant-{i}" for i in range(1, 7)} | {f"spec-{i}" for i in range(1, 7)} <= set(REGISTRY)
