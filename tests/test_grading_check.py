"""check(): right answers pass, slips get hints, bad input gets a message, results recorded."""
import json

from servelib.grading import REGISTRY, check
from servelib.grading.check import RESULTS_ENV


def test_every_reference_computes():
    for ex in REGISTRY.values():
        assert ex.reference() is not None


def test_right_answer_passes(capsys):
    assert check("kv-1", 131072) is True
    assert "correct" in capsys.readouterr().out


def test_gb_vs_gib_hint(capsys):
    assert check("kv-2", 4 * 2**30 / 1e9) is False
    assert "GiB" in capsys.readouterr().out


def test_heads_vs_kv_heads_hint(capsys):
    assert check("kv-1", 8 * 131072) is False
    assert "KV heads" in capsys.readouterr().out


def test_unknown_id_and_wrong_type_do_not_raise(capsys):
    assert check("kv-999", 1) is False
    assert "unknown exercise id" in capsys.readouterr().out
    assert check("kv-1", "131072 bytes") is False
    assert "expected a number" in capsys.readouterr().out
    assert check("kv-1", ...) is False
    assert "not attempted" in capsys.readouterr().out


def test_results_are_recorded_for_the_grader(tmp_path, monkeypatch):
    log = tmp_path / "results.jsonl"
    monkeypatch.setenv(RESULTS_ENV, str(log))
    check("kv-1", 131072)
    check("kv-3", 31)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert rows == [{"exercise": "kv-1", "status": "passed"}, {"exercise": "kv-3", "status": "wrong"}]
