"""The concurrency and roofline calculators: their numbers are servelib's, and they react to controls.

These tests run with whichever ipywidgets is installed; scripts/check_ipywidgets7.sh runs them
again under ipywidgets 7.7 (Colab's).
"""
import matplotlib.pyplot as plt
import pytest

from servelib.hardware import ridge_point
from servelib.memory import capacity
from servelib.models import get_model
from servelib.roofline import predict_tpot_s
from servelib.widgets.concurrency import concurrency_explorer, concurrency_figure, concurrency_report
from servelib.widgets.roofline import decode_point, roofline_explorer, roofline_figure, roofline_report

PNG = b"\x89PNG"


def test_concurrency_report_gives_the_syllabus_183():
    text = concurrency_report("llama-3-70b", "h100-sxm", n_gpus=8, context_len=8192)
    assert "concurrent sequences      183" in text
    assert "KV per token per device   40 KiB" in text     # 320 KiB split over TP=8


def test_concurrency_report_counts_replicas_and_fp8():
    # TP=2 on 8 GPUs: 4 replicas of 10 sequences each (hand-checked against capacity()).
    text = concurrency_report("llama-3-70b", "h100-sxm", n_gpus=8, context_len=8192, tp_degree=2)
    assert "4 replica(s)" in text and "concurrent sequences      40" in text
    fp8 = capacity(get_model("llama-3-70b"), "h100-sxm", n_gpus=8, context_len=8192, bytes_per_elem=1)
    assert f"concurrent sequences      {fp8.concurrency}" in concurrency_report(
        "llama-3-70b", "h100-sxm", n_gpus=8, context_len=8192, kv_bytes_per_elem=1)
    # Half the bytes per token: 57.2 GiB per device / 160 MiB per 8k sequence = 366.2, floored.
    assert fp8.concurrency == 366


def test_concurrency_report_flags_a_model_that_does_not_fit():
    text = concurrency_report("llama-3-70b", "h100-sxm", n_gpus=1, context_len=8192)
    assert "concurrent sequences      0  (does not fit: raise TP)" in text


def test_concurrency_report_rejects_bad_input():
    with pytest.raises(ValueError, match="tp_degree"):
        concurrency_report(n_gpus=8, tp_degree=3)
    with pytest.raises(KeyError, match="known GPUs"):
        concurrency_report(gpu="h1000")


def test_concurrency_figure_has_units_and_one_line_per_tp_degree():
    fig = concurrency_figure("llama-3-70b", "h100-sxm", n_gpus=8, context_len=8192)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "context length (tokens)" and ax.get_ylabel() == "concurrent sequences"
    labels = [t.get_text() for t in fig.legends[0].get_texts()]     # one legend, below the axes
    assert labels == ["TP=1 (does not fit)", "TP=2", "TP=4", "TP=8"]
    tp8 = dict(zip(*ax.get_lines()[3].get_data()))
    assert tp8[8192] == 183
    plt.close(fig)


def test_concurrency_explorer_recomputes_on_every_control():
    box = concurrency_explorer()
    assert "183" in box.report.value and bytes(box.image.value).startswith(PNG)
    box.controls["kv_dtype"].value = "fp8"
    assert "concurrent sequences      366" in box.report.value
    box.controls["tp_degree"].value = 16                 # does not divide 8 GPUs: says why, no number
    assert "not possible: tp_degree (16) must divide n_gpus (8)" in box.report.value
    box.controls["n_gpus"].value = 16
    assert "concurrent sequences" in box.report.value
    with pytest.raises(ValueError, match="kv_dtype"):
        concurrency_explorer(kv_dtype="int3")


def test_decode_point_batch_one_is_memory_bound_near_one_flop_per_byte():
    p = decode_point("llama-3-70b", "h100-sxm", 1, 8192)
    # The syllabus's "~1": 2P FLOPs per 2P bytes of weights, plus attention over 8k tokens
    # (4 L H d c FLOPs, 15% of 2P) against the cache's bytes (2% of the weights).
    assert p["intensity"] == pytest.approx((2 * 70.55e9 + 4 * 80 * 64 * 128 * 8192) / (2 * 70.55e9 + 2.5 * 2**30),
                                           rel=1e-3)
    assert p["utilization"] == pytest.approx(p["intensity"] / ridge_point("h100-sxm"))
    assert p["utilization"] < 0.004                                   # "~0.3% of the GPU"
    assert p["tpot_s"] == predict_tpot_s(get_model("llama-3-70b"), "h100-sxm", 1, 8192)


def test_decode_point_batching_raises_intensity_until_compute_bound():
    small = [decode_point("llama-3-8b", "h100-sxm", b, 512)["intensity"] for b in (1, 8, 64, 512)]
    assert small == sorted(small)
    big = decode_point("llama-3-8b", "h100-sxm", 4096, 128)
    # Past the ridge point the step is compute-bound: utilization is exactly 1 on the roofline.
    assert big["intensity"] > ridge_point("h100-sxm") and big["utilization"] == pytest.approx(1.0)


def test_roofline_report_and_figure():
    text = roofline_report("llama-3-8b", "h100-sxm", batch=256, context_len=4096)
    assert "ridge point              295 FLOP/byte" in text
    assert "(this batch does not fit)" in text                        # 117 sequences fit at 4k
    fig = roofline_figure("llama-3-8b", "h100-sxm", context_len=4096)
    left, right = fig.axes[0], fig.axes[1]
    assert left.get_xlabel() == "arithmetic intensity (FLOP/byte)"
    assert right.get_ylabel() == "decode throughput (tokens/s)" and fig.axes[2].get_ylabel().endswith("(ms)")
    plt.close(fig)


def test_roofline_figure_marks_batches_that_do_not_fit_in_both_panels():
    fig = roofline_figure("llama-3-8b", "h100-sxm", context_len=4096, batches=(1, 64, 256))  # 117 fit at 4k
    for ax in fig.axes[:2]:
        assert [face[3] for face in ax.collections[0].get_facecolors()] == [1, 1, 0]   # hollow: no fill
    # One legend for the figure, below the panels (servelib.plots.legend).
    assert any("beyond the 117 sequences" in t.get_text() for t in fig.legends[0].get_texts())
    plt.close(fig)


def test_roofline_explorer_shows_why_a_dtype_is_missing():
    box = roofline_explorer()
    assert "295 FLOP/byte" in box.report.value and bytes(box.image.value).startswith(PNG)
    box.controls["gpu"].value = "t4"                                  # no bf16 tensor cores
    assert "not possible" in box.report.value and "available: fp32, fp16" in box.report.value
    assert bytes(box.image.value) == b""
    box.controls["dtype"].value = "fp16"
    assert "203 FLOP/byte" in box.report.value and bytes(box.image.value).startswith(PNG)


def test_calculators_take_a_pasted_config_json():
    import json
    import pathlib

    from servelib.widgets.concurrency import concurrency_explorer, concurrency_report
    from servelib.widgets.roofline import roofline_explorer, roofline_report
    text = (pathlib.Path(__file__).parent / "data" / "gpt-oss-20b.json").read_text()
    rep = concurrency_report(text, "h100-sxm", n_gpus=1, context_len=131_072)
    assert "pasted config.json" in rep and "12 full + 12 sliding (128)" in rep and "3 GiB" in rep
    assert "pasted config.json" in roofline_report(json.loads(text), "h100-sxm")
    box = concurrency_explorer()
    box.controls["config"].value = text
    assert "pasted config.json" in box.report.value
    box.controls["config"].value = '{"num_hidden_layers": 2, "hidden_size": 64}'
    assert "not possible" in box.report.value and "num_attention_heads" in box.report.value
    rbox = roofline_explorer()
    rbox.controls["config"].value = "{not json"
    assert "not valid JSON" in rbox.report.value
