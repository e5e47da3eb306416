"""check(): right answers pass, slips get hints, bad input gets a message, answers (not verdicts) recorded."""
import json

import numpy as np
import pytest

from servelib.grading import REGISTRY, Exercise, check, exercise
from servelib.grading.check import RESULTS_ENV, Unusable, compare, decode_answer, encode_answer, hint_for


def test_every_reference_computes():
    for ex in REGISTRY.values():
        assert ex.reference() is not None


def test_right_answer_passes(capsys):
    assert check("kv-1", 131072)
    assert "correct" in capsys.readouterr().out


def test_gb_vs_gib_hint(capsys):
    assert not check("kv-2", 4 * 2**30 / 1e9)
    assert "GiB" in capsys.readouterr().out


def test_heads_vs_kv_heads_hint(capsys):
    assert not check("kv-1", 8 * 131072)
    assert "KV heads" in capsys.readouterr().out


def test_unknown_id_and_wrong_type_do_not_raise(capsys):
    assert not check("kv-999", 1)
    assert "unknown exercise id" in capsys.readouterr().out
    assert not check("kv-1", "131072 bytes")
    assert "expected a number" in capsys.readouterr().out
    assert not check("kv-1", ...)
    assert "not attempted" in capsys.readouterr().out


def test_answers_not_verdicts_are_recorded_for_the_grader(tmp_path, monkeypatch):
    log = tmp_path / "results.jsonl"
    monkeypatch.setenv(RESULTS_ENV, str(log))
    check("kv-1", 131072)
    check("kv-3", 31)
    check("kv-2", ..., context_len=16_384)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert rows == [{"exercise": "kv-1", "answer": {"kind": "number", "value": "131072.0"}, "inputs": {}},
                    {"exercise": "kv-3", "answer": {"kind": "number", "value": "31.0"}, "inputs": {}},
                    {"exercise": "kv-2", "answer": {"kind": "none"}, "inputs": {"context_len": 16384}}]
    assert not any("status" in r for r in rows)


@pytest.mark.parametrize("answer", [131072, 4.5, np.float32(2.5), True, np.bool_(False), "Decode", ..., None,
                                    float("nan"), float("-inf")])
def test_answers_survive_the_trip_to_the_grader(answer):
    back = decode_answer(json.loads(json.dumps(encode_answer(answer))))
    if answer is None or answer is ...:
        assert back is ...
    elif isinstance(answer, float) and answer != answer:
        assert back != back
    else:
        assert back == answer and type(back) is (bool if isinstance(answer, (bool, np.bool_)) else
                                                 str if isinstance(answer, str) else float)


@pytest.mark.parametrize("forged", [{"kind": "number", "value": 131072}, {"kind": "bool", "value": "yes"},
                                    {"kind": "??"}, "passed", None, {"kind": "number", "value": "1" * 100},
                                    {"kind": "other", "type": 3, "repr": []}])
def test_forged_answer_records_decode_to_something_wrong(forged):
    back = decode_answer(forged)
    assert isinstance(back, Unusable)
    ok, message = compare(REGISTRY["kv-1"], 131072, back)
    assert not ok and "expected a number" in message


def test_every_exercise_states_its_tolerance():
    assert REGISTRY["kv-3"].tolerance == "exact"
    assert REGISTRY["kv-2"].tolerance == "within 0.1%"


@pytest.mark.parametrize("ratio, words", [
    (100, "percentage"), (1 / 100, "fraction"), (1000, "per 1M"), (1 / 1000, "per 1k"),
    (8, "bits"), (1 / 8, "bytes where bits"), (4, "KV heads"), (10**9 / 2**30, "GB (10^9 bytes) was asked"),
    (2, "K and V"), (-1, "sign"), (1.005 * 100, "percentage"),  # a rounded slip still matches
])
def test_slips_get_their_hint(ratio, words):
    assert words in hint_for(ratio)


def test_no_hint_for_an_unrelated_answer():
    assert hint_for(1.3) == "" and hint_for(3.0) == "" and hint_for(float("inf")) == ""


def test_exact_answers_and_off_by_one(capsys):
    ref = REGISTRY["kv-3"].reference()
    assert check("kv-3", ref) and check("kv-3", float(ref))
    assert not check("kv-3", ref + 1)
    out = capsys.readouterr().out
    assert "must be exact" in out and "off by one" in out


def test_numpy_numbers_pass():
    assert check("kv-1", np.int64(131072)) and check("kv-2", np.float32(4.0))
    assert check("kv-1", np.array(131072.0))


class Hostile:
    def __float__(self):
        raise RuntimeError("boom")

    def __repr__(self):
        raise RuntimeError("boom")


@pytest.mark.parametrize("answer", [float("nan"), float("inf"), 10**400, [131072], np.array([1, 2]),
                                    3 + 0j, True, b"131072", Hostile(), "131072"])
def test_odd_answers_never_raise_and_are_wrong(answer, capsys, tmp_path, monkeypatch):
    log = tmp_path / "results.jsonl"
    monkeypatch.setenv(RESULTS_ENV, str(log))
    assert not check("kv-1", answer)
    printed = capsys.readouterr().out
    assert "expected" in printed
    # The grader, from what was recorded, says the same.
    recorded = decode_answer(json.loads(log.read_text())["answer"])
    ok, message = compare(REGISTRY["kv-1"], REGISTRY["kv-1"].reference(), recorded)
    assert not ok and "expected" in message and message.split(",")[0] in printed


def test_a_failing_reference_says_so_and_the_answer_is_still_recorded(capsys, tmp_path, monkeypatch):
    def broken():
        raise ZeroDivisionError("defect")
    monkeypatch.setitem(REGISTRY, "zz-1", Exercise("zz-1", broken))
    log = tmp_path / "results.jsonl"
    monkeypatch.setenv(RESULTS_ENV, str(log))
    assert not check("zz-1", 1)
    assert "could not be computed" in capsys.readouterr().out
    assert json.loads(log.read_text())["answer"] == {"kind": "number", "value": "1.0"}


def test_variant_inputs_are_checked(capsys):
    assert check("kv-2", 2.0, context_len=16_384) and not check("kv-2", 4.0, context_len=16_384)
    assert not check("kv-2", 2.0, context_len=12_345)
    assert "not one of its variants" in capsys.readouterr().out
    assert not check("kv-2", 2.0, tokens=16_384)
    assert "no varying input 'tokens'" in capsys.readouterr().out


def test_bool_and_string_references(monkeypatch):
    monkeypatch.setitem(REGISTRY, "zz-1", Exercise("zz-1", lambda: True))
    monkeypatch.setitem(REGISTRY, "zz-2", Exercise("zz-2", lambda: "Decode"))
    assert check("zz-1", True) and check("zz-1", np.bool_(True))
    assert not check("zz-1", 1) and not check("zz-1", False)
    assert check("zz-2", " decode ") and not check("zz-2", "prefill") and not check("zz-2", 3)


def test_an_unwritable_results_file_does_not_stop_the_learner(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(RESULTS_ENV, str(tmp_path / "missing" / "results.jsonl"))
    assert check("kv-1", 131072)
    assert "could not record" in capsys.readouterr().out


@pytest.mark.parametrize("kwargs, match", [({"exercise_id": "kv 7"}, "exercise_id"),
                                           ({"exercise_id": "kv-1"}, "twice"),
                                           ({"exercise_id": "zz-9", "rtol": 1.5}, "rtol"),
                                           ({"exercise_id": "zz-9", "points": 0}, "points"),
                                           ({"exercise_id": "zz-9", "hints": ((0, "x"),)}, "ratio")])
def test_registering_bad_exercises_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        exercise(**kwargs)(lambda: 1)
    assert "zz-9" not in REGISTRY


def test_correct_answer_feedback_does_not_reveal_the_value_and_shows_no_bare_true(capsys):
    result = check("kv-1", 131072)
    assert result == True and bool(result) and repr(result) == "True"  # noqa: E712
    out = capsys.readouterr().out
    assert out.strip() == "[check] kv-1: correct" and "131072" not in out
    assert hasattr(result, "_ipython_display_")        # Jupyter shows nothing for the return value
    assert not check("kv-1", 1) and check("kv-1", 1) == False  # noqa: E712
