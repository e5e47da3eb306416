"""The autograder: execute each submission in a fresh kernel and collect its ``check`` results.

A *submission* is a file directly in the submissions folder, or a notebook inside one of its
sub-folders (one folder per student; the folder is the notebook's working directory, so
data files beside it are available). Each is graded in a worker process that

1. copies the submission (its own sub-folder, or the file alone) into a new temporary
   directory, which becomes the kernel's working directory, so a notebook cannot reach
   another submission or the instructor's files through relative paths;
2. runs the notebook top to bottom in a fresh ``python3`` kernel with nbclient, with
   ``allow_errors`` (a cell that raises does not stop the exercises after it) and one
   deadline for the whole notebook;
3. reads the results that :func:`servelib.grading.check` appended to the file named by
   ``$SERVELIB_GRADING_RESULTS``.

The exercises a submission is graded on come from the *reference* notebook of its chapter
(the ``check`` calls in its solution cells), matched by the exercise ids found in the
submission, else by file name, so a renamed file still grades. This is isolation of working
directories, not a sandbox: a notebook runs with the grader's permissions.
"""
from __future__ import annotations

import concurrent.futures
import csv
import json
import math
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

from .check import ERROR, NOT_ATTEMPTED, PASSED, RESULTS_ENV, WRONG
from .registry import ID_PATTERN, REGISTRY
from .student import BEGIN

TIMEOUT, UNREADABLE = "timeout", "unreadable"
#: Every status a CSV row can carry.
STATUSES = (PASSED, WRONG, NOT_ATTEMPTED, ERROR, TIMEOUT, UNREADABLE)
CSV_HEADER = ("submission", "exercise", "points", "max_points", "status")
#: The ``exercise`` of the single row written for a submission whose chapter is unknown.
UNKNOWN_EXERCISE = "?"
# check("kv-3", ...) in a cell's source, or in a notebook's raw JSON text (quotes escaped).
_CHECK_ID = re.compile(r"""check\(\s*\\?["'](""" + ID_PATTERN + r""")\\?["']""")
# Extra seconds the worker may take beyond the notebook's deadline (kernel start, shut-down)
# before it is killed from outside.
_WORKER_GRACE_S = 90


@dataclass(frozen=True)
class Chapter:
    """A reference notebook: its file stem (``03_kv_cache``) and its exercise ids, in order."""

    name: str
    exercises: tuple[str, ...]


def load_chapters(paths) -> list[Chapter]:
    """The chapters of the reference notebooks ``paths`` (files, or folders of ``[0-9]*.ipynb``).

    A chapter's exercises are the ids of the ``check(...)`` calls in its solution cells.
    Raises ValueError when no reference notebook with exercises is found or an id is not
    registered in :data:`servelib.grading.REGISTRY`.
    """
    files = []
    for p in map(pathlib.Path, paths):
        files += sorted(p.glob("[0-9]*.ipynb")) if p.is_dir() else [p]
    chapters = []
    for f in files:
        nb = nbformat.read(f, as_version=4)
        ids = [m for c in nb.cells if c.cell_type == "code" and BEGIN in c.source
               for m in _CHECK_ID.findall(c.source)]
        unknown = [i for i in ids if i not in REGISTRY]
        if unknown:
            raise ValueError(f"{f}: exercise ids not registered in servelib.grading: {unknown}")
        if ids:
            chapters.append(Chapter(f.stem, tuple(dict.fromkeys(ids))))
    if not chapters:
        raise ValueError(f"no reference notebook with exercises in {[str(p) for p in paths]}")
    return chapters


def find_submissions(root: pathlib.Path) -> list[str]:
    """Submission paths relative to ``root`` (posix, sorted): each top-level file, and each
    notebook in a top-level folder (a folder without one is itself a submission, unreadable).
    Hidden files and folders and ``.ipynb_checkpoints`` are skipped."""
    subs = []
    for entry in root.iterdir():
        if entry.name.startswith("."):
            continue
        if entry.is_file():
            subs.append(entry.name)
        elif entry.is_dir():
            found = [p.relative_to(root).as_posix() for p in entry.rglob("*.ipynb")
                     if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)]
            subs += found or [entry.name]
    return sorted(subs)


def shard(items: list, k: int, n: int) -> list:
    """Shard ``k`` of ``n`` (1 <= k <= n) of ``items``: every n-th item starting at the k-th.

    Deterministic for a given order; the ``n`` shards are disjoint and together hold every
    item exactly once. Raises ValueError for k outside [1, n].
    """
    if not (isinstance(k, int) and isinstance(n, int) and 1 <= k <= n):
        raise ValueError(f"shard must be K/N with 1 <= K <= N, got {k}/{n}")
    return items[k - 1::n]


def _normalise(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def _number(name: str) -> int | None:
    """The number a name starts with (``3`` for ``03_kv_cache`` or ``3_kv``), or None."""
    m = re.match(r"\d+", name)
    return int(m.group()) if m else None


def match_chapter(raw_text: str, filename: str, chapters: list[Chapter]) -> Chapter | None:
    """The chapter a submission belongs to, or None.

    First by the exercise ids its text mentions (most in common wins), then by file name
    (the chapter's stem, its number ``03``, or its topic ``kv_cache`` in the name), and, when
    there is only one chapter, that one.
    """
    ids = set(_CHECK_ID.findall(raw_text))
    overlap = max(chapters, key=lambda c: len(ids & set(c.exercises)))
    if ids & set(overlap.exercises):
        return overlap
    stem = _normalise(pathlib.PurePosixPath(filename).stem)
    for test in (lambda c: _normalise(c.name) in stem,
                 lambda c: _number(stem) is not None and _number(c.name) == _number(stem),
                 lambda c: _normalise(c.name.lstrip("0123456789_")) in stem):
        hits = [c for c in chapters if test(c)]
        if len(hits) == 1:
            return hits[0]
    return chapters[0] if len(chapters) == 1 else None


@dataclass
class Result:
    """The grading of one submission: its status per exercise (in the chapter's order)."""

    submission: str
    chapter: Chapter | None
    status: dict[str, str]
    seconds: float = 0.0
    note: str = ""

    def rows(self) -> list[tuple]:
        """CSV rows ``(submission, exercise, points, max_points, status)``."""
        if self.chapter is None:
            return [(self.submission, UNKNOWN_EXERCISE, 0, 0, self.status[UNKNOWN_EXERCISE])]
        return [(self.submission, ex, REGISTRY[ex].points if st == PASSED else 0, REGISTRY[ex].points, st)
                for ex, st in self.status.items()]


def _read(path: pathlib.Path) -> tuple[str, str]:
    """(raw text, '' if it is a readable notebook else why not)."""
    if path.is_dir():
        return "", "a folder without a notebook"
    raw = path.read_bytes().decode("utf-8", errors="replace")
    try:
        json.loads(raw)
    except ValueError as err:
        return raw, (f"invalid JSON ({err})") if path.suffix == ".ipynb" else f"not a notebook ({path.name})"
    try:
        nbformat.reads(raw, as_version=4)
    except Exception as err:  # nbformat raises several kinds for JSON that is not a notebook
        return raw, f"not a notebook: {str(err).splitlines()[0][:120]}"
    return raw, ""


def grade_submission(root: pathlib.Path, rel: str, chapters: list[Chapter], timeout_s: float) -> Result:
    """Grade the submission ``root / rel`` (see the module doc). Never raises for a broken submission:
    what the grader itself cannot do (an unreadable file, a folder it may not copy) becomes
    the submission's rows, with status error and a note."""
    t0 = time.perf_counter()
    try:
        return _grade_submission(root, rel, chapters, timeout_s, t0)
    except Exception as err:
        chapter = match_chapter("", rel, chapters)
        status = {ex: ERROR for ex in (chapter.exercises if chapter else (UNKNOWN_EXERCISE,))}
        return Result(rel, chapter, status, time.perf_counter() - t0,
                      f"the grader could not process it: {type(err).__name__}: {err}")


def _grade_submission(root, rel, chapters, timeout_s, t0) -> Result:
    path = root / rel
    raw, problem = _read(path)
    chapter = match_chapter(raw, rel, chapters)
    exercises = chapter.exercises if chapter else (UNKNOWN_EXERCISE,)
    if problem or chapter is None:
        note = problem or "no exercise of any reference chapter found; name the file after its chapter"
        return Result(rel, chapter, {ex: UNREADABLE for ex in exercises}, time.perf_counter() - t0, note)
    with tempfile.TemporaryDirectory(prefix="servelib-grade-", ignore_cleanup_errors=True) as tmp:
        tmp = pathlib.Path(tmp)
        work = tmp / "work"
        parts = pathlib.PurePosixPath(rel).parts
        if len(parts) > 1:  # the student's own folder, without symbolic links out of it
            shutil.copytree(root / parts[0], work, ignore=lambda d, names: [
                n for n in names if os.path.islink(os.path.join(d, n))])
            notebook = work.joinpath(*parts[1:])
        else:
            work.mkdir()
            notebook = work / rel
            shutil.copyfile(path, notebook)
        outcome = _run_worker(notebook, tmp / "results.jsonl", tmp / "outcome.json", tmp / "worker.log",
                              timeout_s)
        records = _read_records(tmp / "results.jsonl")
    present = set(_CHECK_ID.findall(raw))
    status = {}
    for ex in exercises:
        if ex in records:
            status[ex] = records[ex]
        elif ex not in present:
            status[ex] = NOT_ATTEMPTED
        elif ex in outcome["raised"]:
            status[ex] = ERROR
        elif outcome["timed_out"]:
            status[ex] = TIMEOUT
        elif outcome["crashed"]:  # the kernel died, or nbclient could not run the notebook
            status[ex] = ERROR
        else:  # its check never ran: commented out, in a branch not taken, or another id
            status[ex] = NOT_ATTEMPTED
    return Result(rel, chapter, status, time.perf_counter() - t0, outcome["note"])


def _read_records(path: pathlib.Path) -> dict[str, str]:
    """The last status each exercise recorded (a notebook may re-run a check); junk lines skipped."""
    last = {}
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            try:
                rec = json.loads(line)
                if rec["status"] in (PASSED, WRONG, NOT_ATTEMPTED, ERROR):
                    last[rec["exercise"]] = rec["status"]
            except (ValueError, KeyError, TypeError):
                continue
    return last


def _run_worker(notebook, results, outcome_path, log, timeout_s) -> dict:
    """Run :func:`_execute` in a new process (its own session, so it can be killed whole)."""
    env = dict(os.environ, **{RESULTS_ENV: str(results)})
    job = json.dumps({"notebook": str(notebook), "outcome": str(outcome_path), "timeout_s": timeout_s})
    code = "import sys; from servelib.grading.grade import _execute_main; _execute_main(sys.argv[1])"
    with open(log, "wb") as log_fh:
        proc = subprocess.Popen([sys.executable, "-c", code, job], env=env, cwd=notebook.parent,
                                stdin=subprocess.DEVNULL, stdout=log_fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            proc.wait(timeout=timeout_s + _WORKER_GRACE_S)
        except subprocess.TimeoutExpired:
            # The kernel runs in a session of its own; it exits when its parent (the worker) dies.
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return {"raised": [], "timed_out": True, "crashed": False,
                    "note": f"killed after {timeout_s + _WORKER_GRACE_S:g} s"}
    try:
        return json.loads(outcome_path.read_text())
    except (OSError, ValueError):
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
        return {"raised": [], "timed_out": False, "crashed": True,
                "note": "the grading worker failed" + (f": {tail[0][:160]}" if tail else "")}


def _execute_main(job_json: str) -> None:
    """Worker entry point: execute one notebook, write the outcome as JSON (see :func:`_execute`)."""
    job = json.loads(job_json)
    outcome = _execute(pathlib.Path(job["notebook"]), float(job["timeout_s"]))
    pathlib.Path(job["outcome"]).write_text(json.dumps(outcome))


def _execute(notebook: pathlib.Path, timeout_s: float) -> dict:
    """Execute ``notebook`` in a fresh python3 kernel in its folder, all cells within ``timeout_s``.

    Returns ``{"raised": [exercise ids whose cell raised], "timed_out": bool,
    "crashed": bool (the kernel died or the notebook could not be run), "note": str}``.
    """
    nb = nbformat.read(notebook, as_version=4)
    deadline = None

    def remaining(cell):  # one deadline for the whole notebook, counted from its first cell
        nonlocal deadline
        if deadline is None:
            deadline = time.monotonic() + timeout_s
        return max(0.1, deadline - time.monotonic())

    client = NotebookClient(nb, kernel_name="python3", timeout_func=remaining, allow_errors=True,
                            shutdown_kernel="immediate", record_timing=False,
                            resources={"metadata": {"path": str(notebook.parent)}})
    timed_out, crashed, note = False, False, ""
    try:
        client.execute()
    except CellTimeoutError:
        timed_out, note = True, f"stopped at the {timeout_s:g} s time limit"
    except DeadKernelError:
        crashed, note = True, "the kernel died"
    except Exception as err:  # a notebook nbclient cannot run; report it, never stop the grader
        first_line = (str(err).splitlines() or [""])[0][:120]
        crashed, note = True, f"could not execute: {type(err).__name__}: {first_line}"
    raised, errors = [], []
    for n, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.get("output_type") == "error":
                raised += _CHECK_ID.findall(cell.source)
                errors.append(f"cell {n} raised {out.get('ename', 'an error')}")
    if errors and not note:
        note = "; ".join(errors[:3]) + (f" (+{len(errors) - 3} more)" if len(errors) > 3 else "")
    return {"raised": raised, "timed_out": timed_out, "crashed": crashed, "note": note}


def grade(root, chapters: list[Chapter], *, timeout_s: float = 300, jobs: int = 1,
          shard_spec: tuple[int, int] = (1, 1)) -> list[Result]:
    """Grade every submission in ``root`` (or shard ``k`` of ``n``) with ``jobs`` parallel workers.

    Results come back in the order of the sorted submission list. Raises ValueError for a
    folder that does not exist, ``jobs`` < 1, a timeout that is not positive or a bad shard.
    """
    root = pathlib.Path(root)
    if not root.is_dir():
        raise ValueError(f"submissions folder {root} does not exist")
    if not (isinstance(jobs, int) and jobs >= 1):
        raise ValueError(f"jobs must be an integer >= 1, got {jobs!r}")
    if not (timeout_s > 0 and math.isfinite(timeout_s)):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout_s!r}")
    subs = shard(find_submissions(root), *shard_spec)
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:  # each job is a process
        return list(pool.map(lambda rel: grade_submission(root, rel, chapters, timeout_s), subs))


def write_csv(results: list[Result], path) -> None:
    """Write the rows of ``results`` under the header ``submission,exercise,points,max_points,status``."""
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(CSV_HEADER)
        for r in results:
            writer.writerows(r.rows())


def summary(results: list[Result]) -> str:
    """A plain-text table: one line per submission with points, counts per status, time and a note."""
    head = ("submission", "chapter", "points", *STATUSES, "seconds", "note")
    lines = []
    for r in results:
        rows = r.rows()
        counts = [sum(row[4] == s for row in rows) for s in STATUSES]
        lines.append((r.submission, r.chapter.name if r.chapter else "?",
                      f"{sum(row[2] for row in rows)}/{sum(row[3] for row in rows)}",
                      *map(str, counts), f"{r.seconds:.1f}", r.note))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines)]
    fmt = lambda row: "  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip()  # noqa: E731
    return "\n".join([fmt(head), fmt(["-" * w for w in widths]), *map(fmt, lines)])
