"""scripts/nbsync.py: the reader's notebook shows no MyST, and refuses what a reader must not meet.

The whole chapters are checked in tests/test_notebooks.py; here each rule on a small case.
"""
import importlib.util
import pathlib

import nbformat
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("nbsync", ROOT / "scripts" / "nbsync.py")
nbsync = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nbsync)

GLUE = {"w8": "'15 GiB'", "price": "'$13,140'", "ratio": "305.2"}


def render(text, glue=GLUE):
    return nbsync.render_markdown(text, glue)


def test_glued_numbers_are_filled_in_as_the_book_formats_them():
    assert render("about {glue:text}`w8` of weights") == "about 15 GiB of weights"
    assert render("{glue:text}`ratio:.0f` times") == "305 times"
    assert render("costs {glue:text}`price` a month") == r"costs \$13,140 a month"   # not maths in Jupyter


def test_a_measured_value_points_at_the_measurement():
    assert render("costs {glue:text}`live_ratio` times") == f"costs {nbsync.MEASURED_TEXT} times"


def test_terms_and_citations_read_as_text():
    assert render("the {term}`prefill <Prefill>` and {term}`TTFT`") == "the prefill and TTFT"
    assert nbsync.references()["kwon2023vllm"] == ("Kwon et al., 2023",
                                                   "https://doi.org/10.1145/3600006.3613165")
    assert nbsync.references()["nvidia_h100"][0] == "NVIDIA, 2023"
    assert nbsync.references()["shazeer2019mqa"][0] == "Shazeer, 2019"
    out = render("vLLM {cite}`kwon2023vllm` and Orca {cite:t}`yu2022orca`")
    assert out.startswith("vLLM ([Kwon et al., 2023](https://doi.org/10.1145/3600006.3613165)) and Orca [Yu et al. (2022)](")
    assert render("{cite}`shazeer2019mqa,ainslie2023gqa`").count(";") == 1
    with pytest.raises(nbsync.SyncError, match="no such key"):
        render("{cite}`nobody2099`")


def test_admonitions_become_visible_call_outs_and_dropdowns_toggles():
    story = "```{admonition} War story: the break-even that moved\n:class: warning\nIt moved {glue:text}`w8`.\n\nTwice.\n```"
    assert render(story) == "> **War story: the break-even that moved**\n>\n> It moved 15 GiB.\n>\n> Twice."
    assert render("```{note}\nMind the units.\n```") == "> **Note**\n>\n> Mind the units."
    answer = ":::{admonition} Answer\n:class: dropdown\nPlan A: two codes.\n:::"
    assert render(answer) == "<details>\n<summary>Answer</summary>\n\nPlan A: two codes.\n\n</details>"


def test_labels_and_comments_are_dropped_and_maths_kept():
    assert render("(sec-kv)=\n## KV\n% a note for authors\n$x_\\text{head}$ and {math}`y`") == \
        "## KV\n$x_\\text{head}$ and $y$"


def test_what_cannot_be_rendered_is_refused():
    with pytest.raises(nbsync.SyncError, match="no plain-Markdown form for this role"):
        render("see {numref}`x` and {abbr}`LLM (large language model)`")
    with pytest.raises(nbsync.SyncError, match="directive {figure}"):
        render("```{figure} a.png\ncaption\n```")
    with pytest.raises(nbsync.SyncError, match="never closed"):
        render("```{note}\nunclosed")
    with pytest.raises(nbsync.SyncError, match="no value glued under 'missing'"):
        render("{glue:text}`missing`")


def glue_output(name, text):
    return nbformat.v4.new_output("display_data", data={"application/papermill.record/text/plain": text},
                                  metadata={"scrapbook": {"name": name, "mime_prefix": "application/papermill.record/"}})


def executed(*cells):
    nb = nbformat.v4.new_notebook()
    for source, tags, outputs in cells:
        cell = nbformat.v4.new_code_cell(source, metadata={"tags": tags} if tags else {})
        cell.outputs, cell.execution_count = outputs, 1
        nb.cells.append(cell)
    return nb


def test_markers_become_tags_and_glue_cells_are_compared():
    source = executed(("# NBVAL_CHECK_OUTPUT\nprint(2)", [], []), ("glue('w8', '15 GiB')", ["remove-cell"], []))
    source.cells.insert(0, nbformat.v4.new_markdown_cell("{glue:text}`w8` of weights"))
    source.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    run = executed(("x", [], [nbformat.v4.new_output("stream", name="stdout", text="2\n")]),
                   ("x", ["remove-cell"], [glue_output("w8", "'15 GiB'")]))
    run.cells.insert(0, nbformat.v4.new_markdown_cell(""))
    nb = nbsync.reader_notebook(source, run)
    md, printed, glued = nb.cells
    assert md.source == "15 GiB of weights"
    assert printed.source == "print(2)" and printed.metadata["tags"] == [nbsync.CHECK_TAG]
    assert glued.metadata["tags"] == ["remove-cell", nbsync.CHECK_TAG] and glued.outputs
    assert glued.metadata["jupyter"] == {"source_hidden": True, "outputs_hidden": True}
    assert nbsync.reader_notebook(source, nb).cells == nb.cells           # a stored notebook comes back unchanged


@pytest.mark.parametrize("cell, message", [
    (("print('x')", ["remove-cell"], [nbformat.v4.new_output("stream", name="stdout", text="x\n")]),
     "plumbing must print nothing"),
    (("fig", [], [nbformat.v4.new_output("execute_result", data={"text/plain": "<matplotlib.legend.Legend at 0x7f3a>"})]),
     "end it with a statement"),
    (("plot()", [], [nbformat.v4.new_output("display_data", data={"image/png": "iVBOR", "text/plain": "<Figure>"})]),
     "a bitmap figure"),
    (("glue('w8', x); print(t)", [], [glue_output("w8", "'1'"), nbformat.v4.new_output("stream", name="stdout", text="t")]),
     "glue it in a cell of its own, or name it live_w8"),
    (("# NBVAL_CHECK_OUTPUT\nglue('live_x', t)", [], [glue_output("live_x", "'3'")]),
     "named as measured"),
    (("plot()", [], [nbformat.v4.new_output("error", ename="FigureError", evalue="a legend overlaps", traceback=[])]),
     "FigureError: a legend overlaps"),
])
def test_what_a_reader_must_not_meet_stops_the_run(cell, message):
    with pytest.raises(nbsync.SyncError, match=message):
        nbsync.check_executed(executed(cell), "ch.py")


def test_leftover_myst_is_recognised():
    """The check on every stored notebook (tests/test_notebooks.py) finds each kind of raw MyST
    that the notebooks once showed: glue, term and cite roles, admonition fences, labels."""
    for raw in ("costs {glue:text}`w8`", "the {term}`KV cache`", "vLLM {cite}`kwon2023vllm`",
                "```{admonition} War story\nbody\n```", ":::{note}\nx\n:::", "(sec-kv)=\n## KV"):
        assert nbsync.LEFTOVER.search(raw), raw
    for plain in ("costs 15 GiB", "> **War story**", "```python\nx = 1\n```", "a {dict} `code`"):
        assert not nbsync.LEFTOVER.search(plain), plain
