"""Integrity flags: what an instructor should look at in a submission.

A flag never changes a grade (the grader already decides every verdict from the answers
alone); it names something a person should read. Flags come from three places:

* the submission's own code (:func:`source_flags`), read without running it: cells that
  are not a cell of the chapter as handed out are parsed (IPython syntax included) and
  searched for the constructs in :data:`FLAGS`;
* its answers, against the student's variant (the grader: ``book-answer``, ``other-inputs``);
* the class as a whole (:func:`same_answers`): identical answers where the variants differ.
"""
from __future__ import annotations

import ast
import math
import re
from collections import defaultdict

from .variants import normalise

#: Every flag, and what it means.
FLAGS = {
    "answer-key": "reads the answer key: an exercise's reference function, the registry, or a module of "
                  "servelib.grading other than check",
    "results-channel": "touches the channel from check to the grader (the results file, its environment "
                       "variable, check's recording functions)",
    "rebinds-servelib": "rebinds servelib: redefines a name imported from it (check, ...), assigns to its "
                        "attributes, or edits sys.modules or builtins",
    "environment": "reads or changes environment variables",
    "dynamic-code": "runs code built at run time (exec, eval, compile, __import__, importlib, ctypes)",
    "shell": "runs shell commands or subprocesses",
    "other-inputs": "called check with inputs other than this student's variant",
    "book-answer": "an answer is right for the book's own variant, not for this student's",
    "wrong-student": "the notebook was written for another student (its metadata names them)",
    "not-on-roster": "the student is not on the roster (graded on the book's own variant)",
    "changed-during-grading": "the submission changed on disk while the class was being graded",
    "same-answers": "answers identical to another submission's where their variants' answers differ",
}

_DYNAMIC = {"exec", "eval", "compile", "__import__"}
_DYNAMIC_MODULES = ("importlib", "ctypes", "marshal")
_SHELL_MODULES = ("subprocess", "pty", "pexpect")
_SHELL_OS = {"system", "popen", "execv", "execve", "execvp", "execl", "execlp", "spawnl", "spawnv", "fork",
             "forkpty", "posix_spawn"}
_SHELL_MAGICS = {"bash", "sh", "script", "system", "sx", "perl", "ruby"}
_ENV_OS = {"environ", "environb", "getenv", "putenv", "unsetenv"}
_CHANNEL = re.compile(r"SERVELIB_GRADING_RESULTS|RESULTS_ENV|\b_record\b|encode_answer")
_KEY = re.compile(r"\bREGISTRY\b|\.reference\b")


def _python(source: str) -> str:
    """``source`` with IPython syntax (magics, ``!``) turned into the Python it runs."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        return TransformerManager().transform_cell(source)
    except Exception:  # IPython missing or the cell beyond repair: read it as it is
        return source


def _dotted(node) -> str:
    """``a.b.c`` for a Name/Attribute chain ('' for anything else)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    if isinstance(node, ast.Call):  # get_ipython().system -> get_ipython().system
        inner = _dotted(node.func)
        return ".".join([inner + "()", *reversed(parts)]) if inner else ""
    return ""


class _Reader(ast.NodeVisitor):
    """Collects (flag, what) pairs from one cell; ``servelib_names`` carries across cells."""

    def __init__(self, servelib_names: set):
        self.found: list[tuple[str, str]] = []
        self.servelib = servelib_names

    def _hit(self, flag, what):
        self.found.append((flag, what))

    def visit_Import(self, node):
        for a in node.names:
            top = a.name.split(".")[0]
            if a.name.startswith("servelib"):
                self.servelib.add(a.asname or top)
                if a.name.startswith("servelib.grading."):
                    self._hit("results-channel" if a.name.startswith("servelib.grading.check") else "answer-key",
                              f"import {a.name}")
            if top in _DYNAMIC_MODULES:
                self._hit("dynamic-code", f"import {a.name}")
            if top in _SHELL_MODULES:
                self._hit("shell", f"import {a.name}")
            if top == "builtins":
                self._hit("rebinds-servelib", f"import {a.name}")
        self.generic_visit(node)

    def visit_ImportFrom(self, node):
        mod = node.module or ""
        top = mod.split(".")[0]
        for a in node.names:
            if mod.startswith("servelib"):
                self.servelib.add(a.asname or a.name)
                if mod == "servelib.grading" and a.name != "check" or mod.startswith("servelib.grading."):
                    flag = "results-channel" if mod.startswith("servelib.grading.check") else "answer-key"
                    self._hit(flag, f"from {mod} import {a.name}")
            if top in _DYNAMIC_MODULES:
                self._hit("dynamic-code", f"from {mod} import {a.name}")
            if top in _SHELL_MODULES or (top == "os" and a.name in _SHELL_OS):
                self._hit("shell", f"from {mod} import {a.name}")
            if top == "os" and a.name in _ENV_OS:
                self._hit("environment", f"from os import {a.name}")
        self.generic_visit(node)

    def _target(self, t, how):
        if isinstance(t, ast.Name) and t.id in self.servelib:
            self._hit("rebinds-servelib", f"{how} {t.id}")
        elif isinstance(t, (ast.Attribute, ast.Subscript)):
            root = _dotted(t.value if isinstance(t, ast.Subscript) else t).split(".")[0]
            name = _dotted(t.value) if isinstance(t, ast.Subscript) else _dotted(t)
            if root in self.servelib or name.startswith(("sys.modules", "builtins", "__builtins__")):
                self._hit("rebinds-servelib", f"{how} {name or root}")
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self._target(e, how)

    def visit_Assign(self, node):
        for t in node.targets:
            self._target(t, "assigns")
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        self._target(node.target, "assigns")
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        self._target(node.target, "assigns")
        self.generic_visit(node)

    def visit_Delete(self, node):
        for t in node.targets:
            self._target(t, "deletes")
        self.generic_visit(node)

    def _define(self, node):
        if node.name in self.servelib:
            self._hit("rebinds-servelib", f"redefines {node.name}")
        self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _define

    def visit_Call(self, node):
        name = _dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        if name in _DYNAMIC:
            self._hit("dynamic-code", f"{name}()")
        if name in ("setattr", "delattr") and node.args:
            target = _dotted(node.args[0]).split(".")[0]
            if target in self.servelib or target in ("sys", "builtins", "__builtins__"):
                self._hit("rebinds-servelib", f"{name}({target}, ...)")
        if name in ("globals", "vars", "locals"):
            self._hit("dynamic-code", f"{name}()")
        if name.startswith("get_ipython()."):
            if last in ("system", "getoutput"):
                self._hit("shell", "! shell command")
            magic = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else ""
            if last == "run_cell_magic" and magic in _SHELL_MAGICS:
                self._hit("shell", f"%%{magic}")
            if last == "run_line_magic" and magic in ("env", "set_env"):
                self._hit("environment", f"%{magic}")
            if last == "run_line_magic" and magic in _SHELL_MAGICS:
                self._hit("shell", f"%{magic}")
        if name.startswith("os.") and last in _SHELL_OS:
            self._hit("shell", f"{name}()")
        self.generic_visit(node)

    def visit_Attribute(self, node):
        name = _dotted(node)
        if name.startswith("os.") and name.split(".")[1] in _ENV_OS:
            self._hit("environment", name)
        if name.startswith(("sys.modules", "importlib")):
            self._hit("rebinds-servelib" if name.startswith("sys.modules") else "dynamic-code", name)
        self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in ("__builtins__",):
            self._hit("rebinds-servelib", node.id)
        self.generic_visit(node)


def source_flags(cells: list[str], known: frozenset = frozenset()) -> list[tuple[str, str]]:
    """Flags of a submission's code cells ``cells`` (in order), as ``(flag, detail)`` pairs.

    A cell whose text (white space aside) is in ``known``, the cells of the chapter as it was
    handed out, is trusted and not read, except that its imports still count. One pair per
    flag, its detail naming the cells and what was found (``cells 4, 9: REGISTRY``).
    """
    hits: dict[str, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    servelib_names: set = set()
    for n, source in enumerate(cells):
        python = _python(source)
        reader = _Reader(servelib_names)
        try:
            reader.visit(ast.parse(python))
        except (SyntaxError, ValueError, RecursionError):
            pass  # a broken cell: the text searches below still apply
        if normalise(source) in known:
            continue
        found = list(reader.found)
        found += [("results-channel", m.group()) for m in _CHANNEL.finditer(python)]
        found += [("answer-key", m.group()) for m in _KEY.finditer(python)]
        for flag, what in found:
            if what not in hits[flag][n]:
                hits[flag][n].append(what)
    out = []
    for flag in FLAGS:
        if flag in hits:
            cells_ = sorted(hits[flag])
            whats = list(dict.fromkeys(w for c in cells_ for w in hits[flag][c]))
            label = "cell" if len(cells_) == 1 else "cells"
            out.append((flag, f"{label} {', '.join(map(str, cells_))}: {', '.join(whats[:4])}"[:300]))
    return out


def same_answers(rows: list[dict]) -> dict[str, list[tuple[str, str]]]:
    """``same-answers`` flags over a whole class, from long-CSV rows (dicts).

    Two submissions of the same chapter are flagged when, on some exercise, their references
    differ (different variants) and their answers are the same number, and either that
    happens on two exercises or more, or the shared answer is not a small whole number
    (which two people can reach by the same mistake). Returns ``{submission: [(flag,
    detail), ...]}``.
    """
    by_exercise = defaultdict(list)
    for r in rows:
        answer, ref = _number(r.get("answer")), _number(r.get("reference"))
        if answer is not None and ref is not None:
            by_exercise[(r.get("chapter"), r["exercise"])].append((r["submission"], answer, ref))
    shared = defaultdict(list)   # (sub_a, sub_b) -> [(exercise, answer)]
    for (_, exercise), entries in by_exercise.items():
        groups = defaultdict(list)
        for sub, answer, ref in entries:
            groups[_key(answer)].append((sub, ref, answer))
        for members in groups.values():
            for i, (a, ref_a, answer) in enumerate(members):
                for b, ref_b, _ in members[i + 1:]:
                    if a != b and not math.isclose(ref_a, ref_b, rel_tol=1e-9, abs_tol=1e-12):
                        shared[tuple(sorted((a, b)))].append((exercise, answer))
    out = defaultdict(list)
    for (a, b), items in sorted(shared.items()):
        notable = len(items) >= 2 or any(not (v.is_integer() and abs(v) <= 1000) for _, v in items)
        if notable:
            names = ", ".join(e for e, _ in items)
            out[a].append(("same-answers", f"with {b}: {names}"))
            out[b].append(("same-answers", f"with {a}: {names}"))
    return dict(out)


def _number(text):
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _key(value: float) -> str:
    """Numbers equal to 12 significant digits share a key."""
    return f"{value:.12g}"
