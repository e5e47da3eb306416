"""The grader decides: forgers score nothing and are flagged; a class on variants; the limits on
what a submission can do; the report (gradebook, flags, feedback) and shards.

Kernels are started only by the three class-sized runs below (a few notebooks each, -j 4).
"""
import csv
import json
import pathlib
import shutil
import signal
import subprocess
import sys
import time
import uuid

import nbformat
import pytest

from servelib.grading import REGISTRY
from servelib.grading import grade as grading
from servelib.grading.__main__ import main
from servelib.grading.grade import kill_tree, load_chapters
from servelib.grading.integrity import FLAGS, source_flags
from servelib.grading.report import GRADEBOOK_IDENTITY, read_long_csvs
from servelib.grading.roster import Course

ROOT = pathlib.Path(__file__).resolve().parent.parent
KV_NOTEBOOK = ROOT / "notebooks" / "03_kv_cache.ipynb"
#: Chapter 03's exercises and their marks, as the registry has them (a new exercise changes no test).
KV_IDS = [ex_id for ex_id in REGISTRY if ex_id.startswith("kv-")]
KV_POINTS = sum(REGISTRY[ex_id].points for ex_id in KV_IDS)
SETUP = "from servelib.grading import check"
SECRET = "class-secret-0123456789abcdef"


def notebook(*cells: str, metadata=None) -> str:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata.update(metadata or {})
    return nbformat.writes(nb)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    ref = tmp_path_factory.mktemp("reference")
    shutil.copy(KV_NOTEBOOK, ref)
    return ref


def run_grade(subs, reference, out, *extra):
    assert main(["grade", str(subs), "-o", str(out), "--reference", str(reference), "-j", "4", *extra]) == 0
    rows = read_long_csvs([out])
    table = {}
    for r in rows:
        table.setdefault(r["submission"], {})[r["exercise"]] = r
    return table


def points(table, sub):
    return sum(int(r["points"]) for r in table[sub].values())


def flags(table, sub):
    return {item.partition(": ")[0] for item in next(iter(table[sub].values()))["flags"].split("; ") if item}


# --- forgers ---------------------------------------------------------------------------

FORGERS = {
    # Writes "passed" for every exercise into the results file; its own checks get wrong answers.
    "writes_passed.ipynb": notebook(
        SETUP, "import json, os\nwith open(os.environ['SERVELIB_GRADING_RESULTS'], 'a') as fh:\n"
               f"    for e in {KV_IDS!r}:\n        fh.write(json.dumps({{'exercise': e, 'status': 'passed'}}) + '\\n')",
        *[f'check("{e}", 0)' for e in KV_IDS],
        "with open(os.environ['SERVELIB_GRADING_RESULTS'], 'a') as fh:\n"
        "    fh.write(json.dumps({'exercise': 'kv-1', 'status': 'passed'}) + '\\n')"),
    # Replaces check with one that records "passed" and says True.
    "patches_check.ipynb": notebook(
        SETUP, "import json, os\ndef check(exercise_id, answer=None, **kw):\n"
               "    with open(os.environ['SERVELIB_GRADING_RESULTS'], 'a') as fh:\n"
               "        fh.write(json.dumps({'exercise': exercise_id, 'status': 'passed'}) + '\\n')\n    return True",
        *[f'assert check("{e}", 0)' for e in KV_IDS]),
    # Patches the comparison inside the kernel: there, every answer is "correct".
    "patches_compare.ipynb": notebook(
        SETUP, "import servelib.grading.check as c\nc.compare = lambda ex, ref, answer: (True, '')\n"
               "c.verdict = lambda *a, **k: ('passed', 'correct')",
        *[f'assert check("{e}", 0)' for e in KV_IDS]),
    # Forges answer records directly: wrong numbers, and records that are not answers at all.
    "forges_records.ipynb": notebook(
        SETUP, "import json, os\nwith open(os.environ['SERVELIB_GRADING_RESULTS'], 'a') as fh:\n"
               "    fh.write(json.dumps({'exercise': 'kv-1', 'answer': {'kind': 'number', 'value': '1'}}) + '\\n')\n"
               "    fh.write(json.dumps({'exercise': 'kv-2', 'answer': {'kind': 'passed'}, 'status': 'passed'}) + '\\n')\n"
               "    fh.write(json.dumps({'exercise': 'kv-3', 'answer': 'passed'}) + '\\n')\n"
               "    fh.write('{\"exercise\": \"kv-4\", \"status\": \"passed\"}\\n')"),
    # Reads the answer key: right answers, so full marks, and flagged for the instructor.
    "reads_answer_key.ipynb": notebook(
        "from servelib.grading import REGISTRY, check",
        *[f'check("{e}", REGISTRY["{e}"].reference())' for e in KV_IDS]),
    # The same, hidden from a plain search for REGISTRY: flagged as code built at run time.
    "obfuscated_key.ipynb": notebook(
        SETUP, "key = getattr(__import__('servelib.grading', fromlist=['x']), 'REG' + 'ISTRY')",
        *[f'check("{e}", key["{e}"].reference())' for e in KV_IDS]),
}


@pytest.fixture(scope="module")
def forged(tmp_path_factory, reference):
    subs = tmp_path_factory.mktemp("forgers")
    for name, text in FORGERS.items():
        (subs / name).write_text(text)
    shutil.copy(KV_NOTEBOOK, subs / "honest.ipynb")
    return run_grade(subs, reference, subs.parent / "forgers.csv", "--timeout", "120")


@pytest.mark.parametrize("forger", ["writes_passed.ipynb", "patches_check.ipynb", "patches_compare.ipynb",
                                    "forges_records.ipynb"])
def test_forging_the_channel_or_the_comparison_scores_zero(forged, forger):
    assert points(forged, forger) == 0, forged[forger]
    assert all(r["status"] in ("wrong", "not attempted") for r in forged[forger].values())


def test_the_chapter_checks_every_registered_kv_exercise():
    assert load_chapters([KV_NOTEBOOK])[0].exercises == tuple(KV_IDS)


def test_forgers_are_flagged_and_the_honest_submission_is_not(forged):
    assert points(forged, "honest.ipynb") == KV_POINTS and flags(forged, "honest.ipynb") == set()
    assert {"results-channel", "environment"} <= flags(forged, "writes_passed.ipynb")
    assert {"rebinds-servelib", "results-channel", "environment"} <= flags(forged, "patches_check.ipynb")
    assert {"rebinds-servelib", "results-channel"} <= flags(forged, "patches_compare.ipynb")
    assert {"results-channel", "environment"} <= flags(forged, "forges_records.ipynb")


def test_reading_the_answer_key_is_detected_not_prevented(forged):
    """Decided: the reference functions ship with servelib, which every kernel imports, so a
    submission can call them; it scores what its answers are worth and is flagged."""
    assert points(forged, "reads_answer_key.ipynb") == KV_POINTS
    assert "answer-key" in flags(forged, "reads_answer_key.ipynb")
    assert points(forged, "obfuscated_key.ipynb") == KV_POINTS
    assert "dynamic-code" in flags(forged, "obfuscated_key.ipynb")


def test_source_flags_read_ipython_syntax_and_trust_the_chapters_own_cells():
    cells = ["from servelib.grading import check as c", "c = print", "%env X=1", "!cat /etc/passwd",
             "import servelib\nservelib.grading.check.compare = None", "exec('1')", "def f():\n    import subprocess"]
    found = dict(source_flags(cells))
    assert set(found) == {"rebinds-servelib", "environment", "shell", "dynamic-code"}
    assert found["rebinds-servelib"].startswith("cells 1, 4")
    assert source_flags(["import os\nos.environ['A'] = '1'"], known=frozenset({"import os os.environ['A'] = '1'"})) == []
    assert set(FLAGS) >= {flag for flag, _ in source_flags(cells)}


# --- a class on variants ---------------------------------------------------------------

def _answer(nb_path: pathlib.Path, answers: dict) -> str:
    """The notebook at ``nb_path`` with its placeholders replaced by ``answers`` (literals)."""
    nb = nbformat.read(nb_path, as_version=4)
    for cell in nb.cells:
        for ex, value in answers.items():
            if cell.cell_type == "code" and f'check("{ex}"' in cell.source:
                cell.source = cell.source.replace("answer = ...  # your answer here", f"answer = {value!r}")
    return nbformat.writes(nb)


@pytest.fixture(scope="module")
def klass(tmp_path_factory, reference):
    base = tmp_path_factory.mktemp("class")
    (base / "roster.csv").write_text("id,name,sis_login_id,section\nalice,Alice A,a1,S1\nbob,Bob B,b2,S1\n"
                                     "carol,Carol C,c3,S2\nerin,Erin E,e5,S2\n")
    (base / "secret.txt").write_text(SECRET + "\n")
    assert main(["student", str(reference), "-o", str(base / "handout"), "--roster", str(base / "roster.csv"),
                 "--secret-file", str(base / "secret.txt")]) == 0
    course = Course.from_files(base / "roster.csv", base / "secret.txt")
    right = {s: {ex: REGISTRY[ex].reference(**course.inputs(s, REGISTRY[ex])) for ex in KV_IDS}
             for s in ("alice", "bob", "carol", "dave")}
    subs = base / "subs"
    for s in ("alice", "bob", "carol", "dave"):
        (subs / s).mkdir(parents=True)
    name = KV_NOTEBOOK.name
    (subs / "alice" / name).write_text(_answer(base / "handout" / "alice" / name, right["alice"]))
    (subs / "bob" / name).write_text((subs / "alice" / name).read_text())        # hands in alice's notebook
    shutil.copy(KV_NOTEBOOK, subs / "carol" / name)                              # the book's solutions
    (subs / "dave" / name).write_text(_answer(base / "handout" / "alice" / name, right["alice"]))  # not enrolled
    out = base / "grades.csv"
    table = run_grade(subs, reference, out, "--roster", str(base / "roster.csv"), "--secret-file",
                      str(base / "secret.txt"), "--report", str(base / "report"), "--timeout", "120")
    return base, table, course, right


def test_each_student_is_graded_on_their_own_variant(klass):
    base, table, course, right = klass
    alice, bob, carol = (table[f"{s}/03_kv_cache.ipynb"] for s in ("alice", "bob", "carol"))
    assert all(r["status"] == "passed" for r in alice.values())
    for ex in KV_IDS:
        differs = right["alice"][ex] != right["bob"][ex]
        assert bob[ex]["status"] == ("wrong" if differs else "passed"), (ex, bob[ex])
        assert json.loads(alice[ex]["inputs"] or "{}") == course.inputs("alice", REGISTRY[ex])
        book = REGISTRY[ex].reference()
        assert carol[ex]["status"] == ("passed" if right["carol"][ex] == book else "wrong")
    assert any(r["status"] == "wrong" for r in bob.values()) and any(r["status"] == "wrong" for r in carol.values())


def test_copying_is_flagged(klass):
    base, table, _, _ = klass
    assert flags(table, "alice/03_kv_cache.ipynb") == set()
    assert {"wrong-student", "other-inputs"} <= flags(table, "bob/03_kv_cache.ipynb")
    assert {"book-answer", "other-inputs"} <= flags(table, "carol/03_kv_cache.ipynb")
    assert "not-on-roster" in flags(table, "dave/03_kv_cache.ipynb")
    with open(base / "report" / "flags.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    same = {(r["student"], r["detail"].split(":")[0]) for r in rows if r["flag"] == "same-answers"}
    assert ("alice", "with bob/03_kv_cache.ipynb") in same and ("bob", "with alice/03_kv_cache.ipynb") in same
    assert all(r["meaning"] == FLAGS[r["flag"]] for r in rows)


def test_gradebook_has_one_row_per_student_in_canvas_shape(klass):
    base, table, _, _ = klass
    with open(base / "report" / "gradebook.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == [*GRADEBOOK_IDENTITY, "03_kv_cache", "Total"]
    by_name = {r[0]: r for r in rows[1:]}
    assert [r[0] for r in rows[1:]] == ["Alice A", "Bob B", "Carol C", "Erin E", "dave"]  # roster order first
    assert by_name["Alice A"][3:] == ["a1", "S1", str(KV_POINTS), str(KV_POINTS)]
    assert by_name["Erin E"][-2:] == ["0", "0"]                        # no submission: zero, still a row
    assert int(by_name["Bob B"][-1]) == points(table, "bob/03_kv_cache.ipynb")


def test_feedback_gives_answers_and_hints_but_no_reference_unless_asked(klass, tmp_path):
    base, table, _, right = klass
    bob = (base / "report" / "feedback" / "bob.md").read_text()
    rows = [line for line in bob.splitlines() if line.startswith("| kv-")]
    assert "| exercise | points | your answer | feedback |" in bob and "Your inputs:" in bob
    assert len(rows) == len(KV_IDS) and all(line.count(" | ") == 3 for line in rows)   # four cells: no answer column
    wrong = [r for r in table["bob/03_kv_cache.ipynb"].values() if r["status"] == "wrong"]
    for r in wrong:
        assert f"| {r['exercise']} | 0/1 | {r['answer']} | {r['message']} |" in bob
    assert (base / "report" / "feedback" / "erin.md").read_text().strip().endswith("No submission was received.")
    assert main(["report", str(base / "grades.csv"), "-o", str(tmp_path), "--show-reference"]) == 0
    shown = (tmp_path / "feedback" / "bob.md").read_text()
    assert "| exercise | points | your answer | feedback | answer |" in shown
    assert all(f"| {r['message']} | {r['reference']} |" in shown for r in wrong)


# --- limits ------------------------------------------------------------------------------

SOLVE_KV1 = 'check("kv-1", 131072)'


def _marker_alive(marker: str) -> bool:
    for cmdline in pathlib.Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes():
                return True
        except OSError:
            continue
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="resource limits and /proc are Linux's")
def test_limits_memory_cpu_output_environment_and_leftover_processes(tmp_path, reference, monkeypatch):
    marker = f"servelib-test-{uuid.uuid4().hex}"
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "memory.ipynb").write_text(notebook(SETUP, "x = bytearray(3 * 2**30)\ncheck('kv-2', 4.0)", SOLVE_KV1))
    (subs / "cpu.ipynb").write_text(notebook(SETUP, SOLVE_KV1, "while True:\n    pass", 'check("kv-2", 4.0)'))
    (subs / "output.ipynb").write_text(notebook(
        SETUP, "open('big.bin', 'wb').write(b'x' * 3 * 2**20)\ncheck('kv-2', 4.0)",
        "print('y' * 20 * 2**20)", SOLVE_KV1))
    (subs / "environment.ipynb").write_text(notebook(
        SETUP, "import os, pathlib, tempfile\n"
               f"clean = ('GRADER_TOKEN' not in os.environ and str(pathlib.Path.home()) != {str(pathlib.Path.home())!r}\n"
               "         and 'servelib-grade-' in str(pathlib.Path.home())\n"
               "         and tempfile.gettempdir().startswith(str(pathlib.Path.home().parent)))\n"
               "check('kv-1', 131072 if clean else -1)"))
    def spawn(tag):  # one process in a session of its own, one orphan of a shell that exits at once
        sleeper = [sys.executable, "-c", "import time; time.sleep(600)", f"{marker}-{tag}"]
        orphan = f"(setsid {sys.executable} -c 'import time; time.sleep(600)' {marker}-{tag}-orphan &)"
        return (f"import subprocess\nsubprocess.Popen({sleeper!r}, start_new_session=True)\n"
                f"subprocess.Popen(['sh', '-c', {orphan!r}]).wait()\n")
    (subs / "leftovers.ipynb").write_text(notebook(SETUP, spawn("ends") + SOLVE_KV1))
    (subs / "deadline.ipynb").write_text(notebook(SETUP, spawn("deadline") + SOLVE_KV1,
                                                  "import time\nwhile True:\n    time.sleep(1)",
                                                  'check("kv-2", 4.0)'))
    monkeypatch.setenv("GRADER_TOKEN", "secret-of-the-instructor")
    t0 = time.perf_counter()
    table = run_grade(subs, reference, tmp_path / "grades.csv", "--timeout", "20", "--max-memory-gib", "1",
                      "--max-cpu-s", "4", "--max-output-mib", "1")
    assert time.perf_counter() - t0 < 200
    status = {sub: {ex: r["status"] for ex, r in rows.items()} for sub, rows in table.items()}
    assert status["memory.ipynb"]["kv-2"] == "error" and status["memory.ipynb"]["kv-1"] == "passed"
    assert status["cpu.ipynb"]["kv-1"] == "passed" and status["cpu.ipynb"]["kv-2"] == "error"
    assert "kernel died" in table["cpu.ipynb"]["kv-2"]["message"]
    assert status["output.ipynb"]["kv-2"] == "error" and status["output.ipynb"]["kv-1"] == "passed"
    assert status["environment.ipynb"]["kv-1"] == "passed"
    assert status["leftovers.ipynb"]["kv-1"] == "passed" and status["deadline.ipynb"]["kv-1"] == "passed"
    assert status["deadline.ipynb"]["kv-2"] == "timeout"
    time.sleep(1)
    assert not _marker_alive(marker), "a process the submission started outlived its grading"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_kill_tree_reaches_processes_that_left_the_session(tmp_path):
    marker = f"servelib-test-{uuid.uuid4().hex}"
    parent = subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys, time\n"
                               f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '{marker}'],"
                               " start_new_session=True)\n"
                               "time.sleep(600)"], start_new_session=True)
    for _ in range(50):
        if _marker_alive(marker):
            break
        time.sleep(0.1)
    assert _marker_alive(marker)
    kill_tree(parent.pid)
    parent.wait(timeout=10)
    time.sleep(0.5)
    assert parent.returncode == -signal.SIGKILL and not _marker_alive(marker)


def test_the_csv_is_written_by_the_grader_alone(tmp_path, reference):
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "x.ipynb").write_text("not json")          # no kernel needed
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "grades.csv"
    out.symlink_to(victim)                             # a link planted where the CSV goes
    assert main(["grade", str(subs), "-o", str(out), "--reference", str(reference)]) == 0
    assert victim.read_text() == "precious" and not out.is_symlink()
    assert out.read_text().startswith(",".join(grading.CSV_HEADER))


def test_a_change_to_servelib_during_grading_is_reported(tmp_path, reference, monkeypatch, capsys):
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "x.ipynb").write_text("not json")
    digests = iter(["before", "after"])
    monkeypatch.setattr(grading, "servelib_digest", lambda: next(digests))
    assert main(["grade", str(subs), "-o", str(tmp_path / "g.csv"), "--reference", str(reference)]) == 1
    assert "servelib's source files changed" in capsys.readouterr().err


@pytest.mark.parametrize("args, words", [(["--max-memory-gib", "-1"], "must be a number >= 0"),
                                         (["--max-cpu-s", "x"], "must be a number >= 0"),
                                         (["--roster", "r.csv"], "go together")])
def test_bad_limits_and_a_roster_without_secret_are_usage_errors(tmp_path, args, words, capsys):
    (tmp_path / "r.csv").write_text("id\nalice\n")
    with pytest.raises(SystemExit) as exc:
        main(["grade", str(tmp_path), *[a.replace("r.csv", str(tmp_path / "r.csv")) for a in args]])
    assert exc.value.code == 2 and words in capsys.readouterr().err


# --- shards ------------------------------------------------------------------------------

def test_shard_csvs_make_the_same_report_as_the_whole_class(tmp_path, reference):
    subs = tmp_path / "subs"
    for s in ("ann", "ben", "cy"):
        (subs / s).mkdir(parents=True)
        (subs / s / "03_kv_cache.ipynb").write_text("not json")   # unreadable: no kernel, real rows
    (subs / "dee.ipynb").write_text("{}")
    whole = tmp_path / "whole.csv"
    assert main(["grade", str(subs), "-o", str(whole), "--reference", str(reference)]) == 0
    shards = []
    for k in (1, 2, 3):
        shards.append(tmp_path / f"grades-{k}.csv")
        assert main(["grade", str(subs), "-o", str(shards[-1]), "--reference", str(reference),
                     "--shard", f"{k}/3"]) == 0
    assert main(["report", str(whole), "-o", str(tmp_path / "a")]) == 0
    assert main(["report", *map(str, shards), "-o", str(tmp_path / "b")]) == 0
    for name in ("gradebook.csv", "flags.csv", "feedback/ann.md", "feedback/dee.md"):
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text(), name
    concatenated = tmp_path / "cat.csv"   # the shards still concatenate into the long CSV
    lines = [shards[0].read_text().splitlines()[0]] + [l for p in shards for l in p.read_text().splitlines()[1:]]
    concatenated.write_text("\n".join(lines) + "\n")
    assert sorted(read_long_csvs([concatenated]), key=str) == sorted(read_long_csvs([whole]), key=str)


def test_a_submission_that_rewrites_another_cannot_change_its_grade(tmp_path, reference):
    subs = tmp_path / "subs"
    subs.mkdir()
    victim = subs / "b.ipynb"
    victim.write_text(notebook(SETUP, SOLVE_KV1))
    (subs / "a.ipynb").write_text(notebook(   # graded first (-j 1, sorted order)
        SETUP, f"open({str(victim)!r}, 'w').write('{{}}')", SOLVE_KV1))
    assert main(["grade", str(subs), "-o", str(tmp_path / "g.csv"), "--reference", str(reference)]) == 0
    table = {}
    for r in read_long_csvs([tmp_path / "g.csv"]):
        table.setdefault(r["submission"], {})[r["exercise"]] = r
    assert victim.read_text() == "{}"                                   # it was rewritten on disk,
    assert table["b.ipynb"]["kv-1"]["status"] == "passed"              # yet graded as handed in,
    assert "changed-during-grading" in flags(table, "b.ipynb")         # and the change is flagged
