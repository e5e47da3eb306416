"""No batch in the book outruns the KV memory of the deployment it describes."""
import sys

import pytest

import servelib.roofline as roofline
from servelib.audit import derive
from servelib.audit.examples import all_plans
from servelib.grading import REGISTRY
from servelib.grading.variants import all_variants, inputs_for
from servelib.models import get_model
from servelib.roofline import check_batch_fits, decode_step, max_decode_batch

LLAMA70, LLAMA8 = get_model("llama-3-70b"), get_model("llama-3-8b")


def test_capacity_of_the_cases_the_book_got_wrong():
    # The war story's TP=2 replica holds 41 sequences of 2k, not 64; one H100 holds 234 of
    # Llama-3-8B at 2k, not 256 or 384.
    assert max_decode_batch(LLAMA70, "h100-sxm", 2048, tp_degree=2) == 41
    assert max_decode_batch(LLAMA8, "h100-sxm", 2048) == 234
    assert max_decode_batch(LLAMA70, "h100-sxm", 8192) == 0          # the weights alone overflow


def test_check_batch_fits_names_what_fits():
    assert check_batch_fits(LLAMA70, "h100-sxm", 41, 2048, tp_degree=2) == 41
    with pytest.raises(ValueError, match="batch 64 does not fit.*holds 41 sequences of 2,048"):
        check_batch_fits(LLAMA70, "h100-sxm", 64, 2048, tp_degree=2)
    with pytest.raises(ValueError, match="holds 0"):
        check_batch_fits(LLAMA70, "h100-sxm", 1, 8192)


def test_decode_step_marks_a_batch_that_does_not_fit():
    rows = [decode_step(LLAMA8, "h100-sxm", b, 2048) for b in (128, 234, 235, 384)]
    assert [r.fits for r in rows] == [True, True, False, False]
    assert {r.max_batch for r in rows} == {234}


def _trace_tpot_calls(fn):
    """Run ``fn`` and record the arguments of every call of ``predict_tpot_s`` it makes."""
    code, calls = roofline.predict_tpot_s.__code__, []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code is code:
            calls.append(dict(frame.f_locals))

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


def _assert_fits(call, reserve_fraction):
    fit = max_decode_batch(call["model"], call["gpu"], call["context_len"], tp_degree=call["tp_degree"],
                           bytes_per_param=call["bytes_per_param"], bytes_per_elem=call["bytes_per_elem"],
                           reserve_fraction=reserve_fraction)
    assert call["batch"] <= fit, (f"batch {call['batch']} of {call['model'].name} at {call['context_len']} "
                                  f"tokens on TP={call['tp_degree']} holds only {fit}")


@pytest.mark.parametrize("exercise_id", sorted(REGISTRY))
def test_every_exercise_decodes_a_batch_that_fits(exercise_id):
    # Every predicted decode step behind an exercise's answer (directly or through
    # decode_tokens_per_s, replica_throughput, decode_step ...) runs a batch the replica's
    # KV memory holds, with the book's 10% reserve, in every variant a student may get.
    # The war story's batch 64 failed here.
    ex = REGISTRY[exercise_id]
    for given in all_variants(ex):
        for call in _trace_tpot_calls(lambda: ex.reference(**inputs_for(ex, given))):
            _assert_fits(call, 0.10)


def test_the_trace_catches_a_batch_that_does_not_fit():
    calls = _trace_tpot_calls(lambda: roofline.decode_tokens_per_s(LLAMA70, "h100-sxm", 64, 2048, tp_degree=2))
    assert len(calls) == 1
    with pytest.raises(AssertionError, match="holds only 41"):
        _assert_fits(calls[0], 0.10)


@pytest.mark.parametrize("name", sorted(all_plans()))
def test_every_audit_plan_predicts_at_a_batch_that_fits(name):
    # A plan's max_batch is an engine limit; the speeds the audit predicts must be at a batch
    # the memory holds (within the plan's own reserve, which may be 0: the hard limit).
    for call in _trace_tpot_calls(lambda: derive(all_plans()[name])):
        _assert_fits(call, 0.0)
