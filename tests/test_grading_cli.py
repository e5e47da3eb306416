"""Student versions and the autograder: python -m servelib.grading student|grade.

Only the KV-cache chapter and small synthetic notebooks are executed, to keep this fast.
"""
import csv
import json
import pathlib
import shutil

import nbformat
import pytest

from servelib.grading import REGISTRY
from servelib.grading.__main__ import main
from servelib.grading.grade import CSV_HEADER, Chapter, find_submissions, match_chapter, shard
from servelib.grading.student import BEGIN, END, strip_solutions, student_notebook, write_student_versions

ROOT = pathlib.Path(__file__).resolve().parent.parent
KV_NOTEBOOK = ROOT / "notebooks" / "03_kv_cache.ipynb"
KV_IDS = [ex_id for ex_id in REGISTRY if ex_id.startswith("kv-")]   # chapter 03's, as registered


def notebook(*cells: str) -> str:
    """A notebook whose code cells are ``cells``, as JSON text."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nbformat.writes(nb)


SETUP = "from servelib.grading import REGISTRY, check"


def solved(ex: str) -> str:
    """A cell that answers ``ex`` correctly (from the reference, as a careful learner would)."""
    return f'answer = REGISTRY["{ex}"].reference()\ncheck("{ex}", answer)'


GOOD = notebook(SETUP, *map(solved, KV_IDS))


@pytest.fixture
def reference(tmp_path):
    """The KV chapter alone as the reference set (chapters added later do not change these tests)."""
    ref = tmp_path / "reference"
    ref.mkdir()
    shutil.copy(KV_NOTEBOOK, ref)
    return ref


def grade(subs, reference, tmp_path, *extra, capsys=None):
    """Run the grade command; return {submission: {exercise: (points, max_points, status)}}."""
    out = tmp_path / "grades.csv"
    assert main(["grade", str(subs), "-o", str(out), "--reference", str(reference), *extra]) == 0
    table = {}
    with open(out, newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == list(CSV_HEADER)
    assert rows[0][:5] == ["submission", "exercise", "points", "max_points", "status"]  # as before
    for sub, ex, pts, mx, status, *_ in rows[1:]:
        assert (sub, ex) not in table.get(sub, {}), "one row per submission and exercise"
        table.setdefault(sub, {})[ex] = (int(pts), int(mx), status)
    return table


def statuses(table, sub):
    return [table[sub][ex][2] for ex in KV_IDS]


# --- student versions ------------------------------------------------------------------

def test_strip_solutions_keeps_check_and_indent():
    src = f"x = 1\n    {BEGIN}\n    y = secret()\n    {END}\n    check(\"kv-1\", y)\nprint(x)"
    assert strip_solutions(src) == "x = 1\n    y = ...  # your answer here\n    check(\"kv-1\", y)\nprint(x)"
    assert strip_solutions(f"{BEGIN}\nsecret\n{END}\ncheck('kv-1', 2 * y)") == \
        "...  # your code here\ncheck('kv-1', 2 * y)"
    for broken in (f"{BEGIN}\nsecret", f"secret\n{END}", f"{BEGIN}\n{BEGIN}\n{END}"):
        with pytest.raises(ValueError, match="SOLUTION"):
            strip_solutions(broken)


def test_student_version_of_the_kv_chapter_leaks_nothing(tmp_path):
    [out] = write_student_versions(KV_NOTEBOOK.parent / KV_NOTEBOOK.name, tmp_path)
    text = out.read_text()
    ref = nbformat.read(KV_NOTEBOOK, as_version=4)
    solutions = [c.source.split(BEGIN)[1].split(END)[0] for c in ref.cells if BEGIN in c.source]
    assert len(solutions) == len(KV_IDS)
    for sol in solutions:
        for line in filter(None, (s.strip() for s in sol.splitlines())):
            assert json.dumps(line)[1:-1] not in text, line
    assert "SOLUTION" not in text
    nb = nbformat.read(out, as_version=4)
    nbformat.validate(nb)
    assert set(nb.metadata) == {"kernelspec", "language_info"}
    exercise_cells = [c for c in nb.cells if "check(" in c.source and "answer = ..." in c.source]
    assert [c.source.splitlines() for c in exercise_cells] == \
        [["answer = ...  # your answer here", f'check("{ex}", answer)'] for ex in KV_IDS]
    for c in nb.cells:
        assert set(c.metadata) <= {"tags"}
        if c.cell_type == "code":
            assert c.outputs == [] and c.execution_count is None
    assert all("hide-input" not in c.metadata.get("tags", []) for c in exercise_cells)


def test_student_version_strips_outputs_metadata_widgets_attachments():
    nb = nbformat.v4.new_notebook()
    nb.metadata.update({"kernelspec": {"name": "python3", "display_name": "P"},
                        "widgets": {"state": "SECRET widget"}, "jupytext": {"x": "SECRET"}})
    code = nbformat.v4.new_code_cell(f"{BEGIN}\nanswer = 31.7  # SECRET\n{END}\ncheck('kv-1', answer)",
                                     execution_count=7, metadata={"tags": ["hide-input", "keep"],
                                                                  "note": "SECRET"})
    code.outputs = [nbformat.v4.new_output("stream", text="SECRET 31.7\n")]
    md = nbformat.v4.new_markdown_cell(f"Explain.\n{BEGIN}\nBecause SECRET.\n{END}")
    md["attachments"] = {"a.png": {"image/png": "U0VDUkVU"}}
    statement = nbformat.v4.new_markdown_cell("![fig](attachment:b.png)")
    statement["attachments"] = {"b.png": {"image/png": "iVBOR"}}
    nb.cells = [code, md, statement]
    student = student_notebook(nb)
    text = nbformat.writes(student)
    # 31.7 cannot hide in a random hex cell id, as a bare integer could.
    assert "SECRET" not in text and "U0VDUkVU" not in text and "31.7" not in text
    assert student.cells[0].source == "answer = ...  # your answer here\ncheck('kv-1', answer)"
    assert student.cells[0].metadata == {"tags": ["keep"]} and student.cells[0].execution_count is None
    assert student.cells[1].source == "Explain.\n_Your answer here._"
    assert student.cells[2].attachments == statement["attachments"]  # part of the statement


def test_student_command_refuses_to_overwrite_and_writes_nothing_on_bad_markers(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(KV_NOTEBOOK, src)
    with pytest.raises(SystemExit) as exc:
        main(["student", str(src), "-o", str(src)])
    assert exc.value.code == 2 and "overwrite" in capsys.readouterr().err
    (src / "04_bad.ipynb").write_text(notebook(f"{BEGIN}\nx = 1\ncheck('kv-1', x)"))
    with pytest.raises(SystemExit):
        main(["student", str(src), "-o", str(tmp_path / "out")])
    assert "04_bad.ipynb" in capsys.readouterr().err and not (tmp_path / "out").exists()
    (src / "04_bad.ipynb").unlink()
    assert main(["student", str(src), "-o", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / KV_NOTEBOOK.name).exists()


# --- grading ---------------------------------------------------------------------------

def test_reference_scores_full_marks_and_student_version_zero(tmp_path, reference, capsys):
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(KV_NOTEBOOK, subs / "reference.ipynb")
    write_student_versions(KV_NOTEBOOK, subs / "learner")
    table = grade(subs, reference, tmp_path, "-j", "2")
    assert table["reference.ipynb"] == {ex: (1, 1, "passed") for ex in KV_IDS}
    assert table["learner/03_kv_cache.ipynb"] == {ex: (0, 1, "not attempted") for ex in KV_IDS}
    out = capsys.readouterr().out
    n = len(KV_IDS)
    assert "reference.ipynb" in out and f"{n}/{n}" in out and f"0/{n}" in out


def test_broken_submissions_are_reported_and_never_affect_the_good_ones(tmp_path, reference):
    subs = tmp_path / "subs"
    (subs / "alice").mkdir(parents=True)
    (subs / "bob").mkdir()
    # alice is good, and tries to reach other submissions and to change her own files.
    (subs / "alice" / "data.txt").write_text("original")
    vandal = ('import os\nopen("data.txt", "w").write("changed")\nos.remove("03_kv_cache.ipynb")\n'
              'isolated = not any(os.path.exists(os.path.join("..", n)) for n in ("bob", "carol.ipynb"))')
    (subs / "alice" / "03_kv_cache.ipynb").write_text(notebook(
        SETUP, vandal, 'check("kv-1", REGISTRY["kv-1"].reference() if isolated else -1)',
        *map(solved, KV_IDS[1:])))
    (subs / "bob" / "homework final (2).ipynb").write_text(GOOD)  # renamed file
    (subs / "carol.ipynb").write_text("I could not do it, sorry")  # not a notebook
    (subs / "dave.ipynb").write_text(GOOD[: len(GOOD) // 2])  # invalid JSON
    (subs / "erin.ipynb").write_text(notebook(  # cells that raise
        SETUP, solved("kv-1"), "answer = 1 / 0\n" + solved("kv-2"), "raise RuntimeError('oops')",
        *map(solved, KV_IDS[2:])))
    (subs / "frank.ipynb").write_text(notebook(SETUP, *map(solved, KV_IDS[:2])))  # deleted cells
    (subs / "gina.ipynb").write_text(notebook(*map(solved, KV_IDS)))  # deleted set-up cell
    (subs / "henry.pdf").write_bytes(b"%PDF-1.4\n\xff\xfe binary")
    table = grade(subs, reference, tmp_path, "-j", "2", "--timeout", "120")

    assert set(table) == {"alice/03_kv_cache.ipynb", "bob/homework final (2).ipynb", "carol.ipynb",
                          "dave.ipynb", "erin.ipynb", "frank.ipynb", "gina.ipynb", "henry.pdf"}
    for good in ("alice/03_kv_cache.ipynb", "bob/homework final (2).ipynb"):
        assert table[good] == {ex: (1, 1, "passed") for ex in KV_IDS}, good
    assert (subs / "alice" / "data.txt").read_text() == "original"
    assert (subs / "alice" / "03_kv_cache.ipynb").exists()
    for broken in ("carol.ipynb", "dave.ipynb", "henry.pdf"):
        assert table[broken] == {ex: (0, 1, "unreadable") for ex in KV_IDS}, broken
    assert statuses(table, "erin.ipynb") == ["passed", "error"] + ["passed"] * (len(KV_IDS) - 2)
    assert statuses(table, "frank.ipynb") == ["passed"] * 2 + ["not attempted"] * (len(KV_IDS) - 2)
    assert statuses(table, "gina.ipynb") == ["error"] * len(KV_IDS)


def test_timeout_is_enforced_per_notebook(tmp_path, reference):
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "good.ipynb").write_text(GOOD)
    (subs / "loop.ipynb").write_text(notebook(SETUP, solved("kv-1"), "while True:\n    pass",
                                              solved("kv-2")))
    table = grade(subs, reference, tmp_path, "--timeout", "5", "-j", "2")
    assert table["good.ipynb"] == {ex: (1, 1, "passed") for ex in KV_IDS}
    assert statuses(table, "loop.ipynb") == ["passed", "timeout"] + ["not attempted"] * (len(KV_IDS) - 2)


def test_unknown_chapter_gets_one_row_and_matching_is_by_ids_then_name():
    kv, econ = Chapter("03_kv_cache", tuple(KV_IDS)), Chapter("07_economics", ("econ-1", "econ-2"))
    chapters = [kv, econ]
    assert match_chapter('check(\\"econ-2\\", answer)', "whatever.ipynb", chapters) is econ
    assert match_chapter("", "07 Economics - Alice.ipynb", chapters) is econ
    assert match_chapter("", "alice/3_kv.ipynb", chapters) is kv
    assert match_chapter("", "ch06.ipynb", chapters) is None  # no leading number, no topic
    assert match_chapter("", "kv_cache_alice.ipynb", chapters) is kv
    assert match_chapter("", "notes.txt", chapters) is None
    assert match_chapter("", "notes.txt", [kv]) is kv


def test_shards_cover_every_submission_exactly_once(tmp_path, reference):
    items = list(range(23))
    for n in range(1, 6):
        parts = [shard(items, k, n) for k in range(1, n + 1)]
        assert sorted(sum(parts, [])) == items
    subs = tmp_path / "subs"
    (subs / "zed").mkdir(parents=True)  # a folder without a notebook is a submission too
    for i in range(7):  # unreadable files: grading them starts no kernel
        (subs / f"s{i}.ipynb").write_text("not json")
    whole = grade(subs, reference, tmp_path)
    assert sorted(whole) == find_submissions(subs) and len(whole) == 8
    lines = []
    for k in (1, 2, 3):
        out = tmp_path / f"grades-{k}.csv"
        assert main(["grade", str(subs), "-o", str(out), "--reference", str(reference),
                     "--shard", f"{k}/3"]) == 0
        lines += out.read_text().splitlines()[1:]  # each shard file starts with the header
    full = (tmp_path / "grades.csv").read_text().splitlines()[1:]
    assert sorted(lines) == sorted(full)


@pytest.mark.parametrize("args", [["--shard", "0/2"], ["--shard", "3/2"], ["--shard", "x"],
                                  ["-j", "0"], ["--timeout", "-1"], ["--timeout", "nan"]])
def test_bad_options_are_usage_errors(tmp_path, args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["grade", str(tmp_path), *args])
    assert exc.value.code == 2 and "must be" in capsys.readouterr().err


def test_missing_submissions_folder_is_a_usage_error(tmp_path, reference, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["grade", str(tmp_path / "nope"), "--reference", str(reference)])
    assert exc.value.code == 2 and "does not exist" in capsys.readouterr().err


def test_an_empty_class_folder_is_a_usage_error_and_writes_no_csv(tmp_path, reference, capsys):
    (tmp_path / "class").mkdir()
    out = tmp_path / "grades.csv"
    with pytest.raises(SystemExit) as exc:
        main(["grade", str(tmp_path / "class"), "-o", str(out), "--reference", str(reference)])
    assert exc.value.code == 2 and "no submissions found" in capsys.readouterr().err
    assert not out.exists()


def _documented_commands():
    """Every ``python -m servelib.grading ...`` command in the README and the instructor page."""
    import re
    import shlex
    for doc in (ROOT / "README.md", ROOT / "book" / "instructor.md"):
        for block in re.findall(r"```bash\n(.*?)```", doc.read_text(), flags=re.S):
            text = block.replace("\\\n", " ")
            for line in text.splitlines():
                if "python -m servelib.grading " not in line:
                    continue
                rest = line.split("python -m servelib.grading ", 1)[1].replace("$SLURM_ARRAY_TASK_ID", "1")
                if rest.count("'") % 2:
                    rest = rest.replace("'", "")
                yield doc.name, shlex.split(rest, comments=True)


def test_documented_commands_parse():
    from servelib.grading.__main__ import _parser
    commands = list(_documented_commands())
    assert {args[0] for _, args in commands} == {"student", "grade", "report"}
    for doc, args in commands:
        _parser().parse_args(args)  # exits (status 2) on an option the command does not take


def test_report_refuses_a_csv_that_is_not_the_graders(tmp_path, capsys):
    bad = tmp_path / "grades.csv"
    bad.write_text("submission,exercise,points,max_points,status\nx,kv-1,1,1,passed\n")
    with pytest.raises(SystemExit) as exc:
        main(["report", str(bad), "-o", str(tmp_path / "out")])
    assert exc.value.code == 2 and "not a CSV of the grader" in capsys.readouterr().err


def test_same_answers_needs_two_exercises_or_one_unusual_number():
    from servelib.grading.integrity import same_answers

    def row(sub, ex, answer, ref):
        return {"submission": sub, "chapter": "c", "exercise": ex, "answer": answer, "reference": ref}
    small = [row("a", "x-1", "4", "4"), row("b", "x-1", "4", "8")]            # one small count: chance
    assert same_answers(small) == {}
    unusual = [row("a", "x-2", "12.375", "12.375"), row("b", "x-2", "12.375", "13.5")]
    assert same_answers(unusual) == {"a": [("same-answers", "with b: x-2")], "b": [("same-answers", "with a: x-2")]}
    same_variant = [row("a", "x-2", "12.375", "12.375"), row("b", "x-2", "12.375", "12.375")]
    assert same_answers(same_variant) == {}                                     # same variant: no sign of copying
    two = small + [row("a", "x-3", "2", "2"), row("b", "x-3", "2", "1")]
    assert set(same_answers(two)) == {"a", "b"}
