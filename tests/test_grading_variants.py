"""Per-student variants: every exercise declares them, the chapter shows the default one word for
word, every variant is solvable and its hints work, draws are seeded by the secret, and the
student notebooks of a class show each student's numbers."""
import ast
import collections
import hashlib
import hmac
import math
import pathlib

import nbformat
import pytest

from servelib.grading import REGISTRY, exercise
from servelib.grading.check import verdict
from servelib.grading.roster import Course, Student, read_roster, read_secret
from servelib.grading.student import write_student_versions
from servelib.grading.variants import (all_variants, check_call, draw, inputs_for, literal, normalise, render,
                                       statement_start)
from servelib.memory import capacity
from servelib.models import get_model

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
SECRET = b"0123456789abcdef-test-secret"


def statements() -> dict:
    """{exercise id: (notebook, statement text)} as the chapter notebooks print them."""
    found = {}
    for path in NOTEBOOKS:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "markdown":
                for ex_id in REGISTRY:
                    start = statement_start(cell.source, ex_id)
                    if start is not None:
                        found[ex_id] = (path.name, cell.source[start:])
    return found


def test_every_exercise_declares_its_variants():
    missing = sorted(i for i, ex in REGISTRY.items() if ex.vary is None or not ex.text)
    assert not missing, ("these exercises declare no variants: give each @exercise(...) vary={input: values} "
                         f"and text=<its statement> (see servelib.grading.variants): {missing}")


@pytest.mark.parametrize("ex_id", sorted(REGISTRY))
def test_declared_values_include_the_default_and_survive_a_check_call(ex_id):
    ex = REGISTRY[ex_id]
    for name, values in (ex.vary or {}).items():
        assert ex.defaults[name] in values, f"{ex_id}: vary[{name!r}] leaves out the default {ex.defaults[name]!r}"
        assert len(set(values)) == len(values), f"{ex_id}: vary[{name!r}] repeats a value"
        for v in values:  # a student's check call shows the value as Python source
            assert ast.literal_eval(literal(v)) == v


@pytest.mark.parametrize("ex_id", sorted(REGISTRY))
def test_the_chapter_shows_the_default_variant_word_for_word(ex_id):
    found = statements()
    assert ex_id in found, f"{ex_id}: no '**{ex_id}.**' statement in any chapter notebook"
    notebook, text = found[ex_id]
    assert normalise(text) == normalise(render(REGISTRY[ex_id])), (
        f"{notebook}: the statement of {ex_id} differs from its text= in servelib.grading; change both")


@pytest.mark.parametrize("ex_id", sorted(REGISTRY))
def test_every_variant_is_solvable_and_its_hints_work(ex_id):
    ex = REGISTRY[ex_id]
    texts = set()
    for given in all_variants(ex):
        ref = ex.reference(**inputs_for(ex, given))
        texts.add(normalise(render(ex, given)))
        assert isinstance(ref, (bool, str)) or (ref is not None and math.isfinite(float(ref))), (ex_id, given, ref)
        assert verdict(ex, ref, given)[0] == "passed"
        if isinstance(ref, (bool, str)) or not ref:
            continue
        status, message = verdict(ex, ref * 1000, given)
        assert status == "wrong" and "1000x too large" in message, (ex_id, given, message)
        if ex.rtol == 0 and float(ref).is_integer():
            status, message = verdict(ex, ref + 1, given)
            assert status == "wrong" and "off by one" in message, (ex_id, given, message)
    assert len(texts) == len(list(all_variants(ex))), f"{ex_id}: two variants show the same statement"


def test_the_batches_of_a_throughput_exercise_fit_in_memory():
    ex = REGISTRY["bt-6"]
    for given in all_variants(ex):
        v = inputs_for(ex, given)
        fits = capacity(get_model("llama-3-8b"), v["gpu"], n_gpus=1, context_len=v["context_len"]).concurrency
        assert v["batch"] <= fits, f"bt-6 {given}: a batch of {v['batch']} does not fit ({fits} sequences)"


@pytest.mark.parametrize("ex_id", sorted(i for i, ex in REGISTRY.items() if ex.unit in ("sequences", "conversations")))
def test_every_variant_counts_at_least_one_sequence(ex_id):
    """A deployment that holds no sequence (or a gap of none) is no exercise."""
    ex = REGISTRY[ex_id]
    for given in all_variants(ex):
        assert ex.reference(**inputs_for(ex, given)) >= 1, f"{ex_id} {given}: the deployment holds no sequence"


def test_draws_follow_the_secret_and_the_student_and_stay_in_range():
    ex = REGISTRY["pd-6"]
    a = draw(ex, "alice", SECRET)
    assert a == draw(ex, "alice", SECRET) and set(a) == set(ex.vary)
    assert all(a[k] in ex.vary[k] for k in a)
    # The seed of each input is HMAC-SHA256(secret, student \0 exercise \0 input), taken modulo the count.
    digest = hmac.new(SECRET, b"alice\0pd-6\0gpu", hashlib.sha256).digest()
    assert a["gpu"] == ex.vary["gpu"][int.from_bytes(digest, "big") % len(ex.vary["gpu"])]
    students = [f"s{i:03d}" for i in range(300)]
    draws = [tuple(draw(ex, s, SECRET).values()) for s in students]
    # 140 variants: 300 uniform draws hit about 124 of them (140 * (1 - (1 - 1/140) ** 300)).
    assert len(list(all_variants(ex))) == 140 and len(set(draws)) > 105
    counts = collections.Counter(d[0] for d in draws)
    assert set(counts) == set(ex.vary["gpu"]) and min(counts.values()) > 30  # every GPU, about evenly
    assert draws != [tuple(draw(ex, s, b"another secret of 16+ bytes").values()) for s in students]
    with pytest.raises(ValueError, match="secret"):
        draw(ex, "alice", b"")


def test_a_bad_variant_declaration_is_refused():
    def ref(context_len=4096):
        return context_len
    with pytest.raises(ValueError, match="not a keyword input"):
        exercise("zz-8", vary={"tokens": (1, 2)}, text="x")(ref)
    with pytest.raises(ValueError, match="needs its statement"):
        exercise("zz-8", vary={"context_len": (4096, 8192)})(ref)
    with pytest.raises(TypeError, match="sequence"):
        exercise("zz-8", vary={"context_len": 4096}, text="x")(ref)
    assert "zz-8" not in REGISTRY
    exercise("zz-8", rtol=0, unit="tokens")(ref)   # the simple form stays valid: no variants declared
    try:
        assert REGISTRY["zz-8"].vary is None and REGISTRY["zz-8"].reference() == 4096
    finally:
        del REGISTRY["zz-8"]


def test_a_roster_and_a_secret(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("Student,id,SIS User ID,Section\nAlice A,alice,1001,S1\nBob B,bob,1002,S2\n")
    assert read_roster(roster) == [Student("alice", "Alice A", "", "1001", "", "S1"),
                                   Student("bob", "Bob B", "", "1002", "", "S2")]
    for bad, match in (("name\nx\n", "'id' column"), ("id\nalice\nalice\n", "twice"), ("id\n../x\n", "letters"),
                       ("id\n", "no student")):
        roster.write_text(bad)
        with pytest.raises(ValueError, match=match):
            read_roster(roster)
    secret = tmp_path / "secret"
    secret.write_text("short\n")
    with pytest.raises(ValueError, match="at least 16"):
        read_secret(secret)
    secret.write_text(SECRET.decode() + "\n")
    assert read_secret(secret) == SECRET
    with pytest.raises(ValueError, match="go together"):
        Course.from_files(roster, None)
    course = Course((Student("alice"), Student("al")), SECRET)
    assert [course.student_of(p) for p in ("alice/03_kv.ipynb", "alice_03_kv.ipynb", "al-03.ipynb", "x.ipynb")] == \
        ["alice", "alice", "al", "x"]


def test_student_notebooks_of_a_class_show_each_students_numbers(tmp_path):
    course = Course((Student("alice"), Student("bob")), SECRET)
    kv = ROOT / "notebooks" / "03_kv_cache.ipynb"
    paths = write_student_versions(kv, tmp_path / "out", course)
    assert paths == [tmp_path / "out" / "alice" / kv.name, tmp_path / "out" / "bob" / kv.name]
    reference = nbformat.read(kv, as_version=4)
    for student, path in zip(("alice", "bob"), paths):
        nb = nbformat.read(path, as_version=4)
        assert nb.metadata["servelib"] == {"student": student}
        assert len(nb.cells) == len(reference.cells)
        text = "\n".join(c.source for c in nb.cells)
        for ex_id in (i for i in REGISTRY if i.startswith("kv-")):
            given = course.inputs(student, REGISTRY[ex_id])
            assert normalise(render(REGISTRY[ex_id], given)) in normalise(text)
            assert check_call(ex_id, "answer", given) in text
        # Cells other than statements and checks are the chapter's own.
        for old, new in zip(reference.cells, nb.cells):
            if "**kv-" not in old.source and "check(" not in old.source:
                assert old.source == new.source
    assert nbformat.read(paths[0], as_version=4).cells != nbformat.read(paths[1], as_version=4).cells
