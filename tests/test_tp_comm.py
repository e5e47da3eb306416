"""Tensor-parallel communication: link datasheets, the alpha-beta all-reduce, its share of a decode step."""
import pytest

from servelib.hardware import get_gpu, list_gpus
from servelib.interconnect import (NVLINK_LATENCY_S, allreduce_time_s, fit_allreduce, get_link, list_links,
                                   ring_allreduce_factor)
from servelib.models import get_model
from servelib.published import GPT_FAST_A100_PEAK_BANDWIDTH_BPS, fit_tp_scaling
from servelib.roofline import decode_step, predict_tpot_s, tp_allreduce_bytes, tp_comm_time_s

LLAMA70, LLAMA8 = get_model("llama-3-70b"), get_model("llama-3-8b")


def test_every_gpu_preset_has_a_link_with_a_source():
    # A preset added to servelib.hardware without its link entry fails here.
    for name in list_gpus():
        link = get_link(name)
        assert link.gpu == name and link.source and link.latency_source
        assert link.kind in ("nvlink", "infinity-fabric", "pcie")
    assert get_link(get_gpu("h100-sxm")) is get_link("H100-SXM ")


def test_link_entries_for_the_presets_being_added():
    # RTX 4090/3090, A10/A10G, L40, H20, MI325X: entries ready for their GPU presets.
    for name in ("rtx-4090", "rtx-3090", "a10", "a10g", "l40", "h20", "mi325x"):
        assert name in list_links()


def test_datasheet_bandwidths_are_per_direction():
    assert get_link("h100-sxm").bandwidth_Bps == 450e9      # NVLink 900 GB/s, both directions
    assert get_link("a100-80gb").bandwidth_Bps == 300e9     # NVLink 600 GB/s
    assert get_link("l4").bandwidth_Bps == 32e9             # PCIe Gen4 x16, 64 GB/s both ways
    assert get_link("mi300x").bandwidth_Bps == 448e9        # 7 x 128 GB/s links, both ways
    assert get_link("b200").bandwidth_Bps == 900e9
    assert get_link("l40s").kind == "pcie" and get_link("h200").kind == "nvlink"


def test_unknown_gpu_has_no_link():
    with pytest.raises(KeyError, match="known"):
        get_link("tpu-v5e")
    with pytest.raises(TypeError):
        get_link(3)


def test_ring_allreduce_by_hand():
    assert ring_allreduce_factor(1) == 0 and ring_allreduce_factor(2) == 1 and ring_allreduce_factor(8) == 1.75
    # 1 MB over 8 devices at 100 GB/s per direction: 10 us latency + 1.75 x 10 us.
    assert allreduce_time_s(1e6, 8, 100e9, 10e-6) == pytest.approx(10e-6 + 17.5e-6)
    assert allreduce_time_s(1e6, 1, 100e9, 10e-6) == 0
    with pytest.raises(ValueError, match="message_bytes"):
        allreduce_time_s(-1, 2, 1e9, 1e-6)
    with pytest.raises(ValueError, match="latency_s"):
        allreduce_time_s(1, 2, 1e9, 0)


def test_fit_recovers_alpha_and_beta():
    sizes = [1e3, 1e5, 1e6, 4e6]
    times = [allreduce_time_s(m, 2, 5e9, 300e-6) for m in sizes]
    lat, bw = fit_allreduce(sizes, times, 2)
    assert lat == pytest.approx(300e-6) and bw == pytest.approx(5e9)
    with pytest.raises(ValueError, match="distinct"):
        fit_allreduce([1e3, 1e3], [1e-3, 1e-3], 2)
    with pytest.raises(ValueError, match="grow"):
        fit_allreduce([1e3, 1e6], [2e-3, 1e-3], 2)


def test_decode_step_sends_two_allreduces_per_layer():
    assert tp_allreduce_bytes(LLAMA70, 1) == 16 * 1024 and tp_allreduce_bytes(LLAMA8, 64) == 64 * 4096 * 2
    link = get_link("h100-sxm")
    one = allreduce_time_s(16 * 1024, 8, link.bandwidth_Bps, link.latency_s)
    assert tp_comm_time_s(LLAMA70, "h100-sxm", 1, 8) == pytest.approx(2 * 80 * one)
    assert tp_comm_time_s(LLAMA70, "h100-sxm", 1, 1) == 0
    # At batch 1 the latency is nearly everything: 160 calls of ~9 us.
    assert tp_comm_time_s(LLAMA70, "h100-sxm", 1, 8) == pytest.approx(160 * NVLINK_LATENCY_S, rel=0.01)
    assert tp_comm_time_s(LLAMA70, "h100-sxm", 1, 2, latency_s=30e-6) == pytest.approx(160 * 30e-6, rel=0.01)


def test_comm_share_grows_with_tp_and_tpot_is_roofline_plus_comm():
    shares = [decode_step(LLAMA8, "h100-sxm", 1, 2048, tp_degree=tp).comm_share for tp in (1, 2, 4, 8)]
    assert shares[0] == 0 and shares == sorted(shares) and shares[-1] > 0.4
    s = decode_step(LLAMA70, "h100-sxm", 8, 2048, tp_degree=4)
    assert s.roofline_s == predict_tpot_s(LLAMA70, "h100-sxm", 8, 2048, tp_degree=4)
    assert s.tpot_s == pytest.approx(s.roofline_s + s.comm_s) and s.roofline_s == max(s.compute_s, s.memory_s)
    assert s.tokens_per_gpu_s == pytest.approx(8 / s.tpot_s / 4)
    # Per-GPU throughput falls with TP once communication is counted (it is flat without it).
    per_gpu = [decode_step(LLAMA70, "h100-sxm", 8, 2048, tp_degree=tp).tokens_per_gpu_s for tp in (2, 4, 8)]
    assert per_gpu == sorted(per_gpu, reverse=True)
    flat = [decode_step(LLAMA70, "h100-sxm", 8, 2048, tp_degree=tp, comm=False).tokens_per_gpu_s for tp in (2, 4, 8)]
    assert max(flat) / min(flat) < 1.01


def test_published_tp_scaling_fits_the_readme_bandwidth_and_a_per_call_cost():
    # gpt-fast's TP rows fitted to bytes/B + 2L*a: B lands on the README's ~1,700 GB/s and a
    # at about 30 us per all-reduce, three times what the NCCL-level latency predicts.
    for model in ("llama-2-7b", "llama-2-70b"):
        fit = fit_tp_scaling(model)
        assert fit.tp_degrees == (2, 4, 8)
        assert fit.bandwidth_Bps == pytest.approx(GPT_FAST_A100_PEAK_BANDWIDTH_BPS, rel=0.03)
        assert 20e-6 < fit.allreduce_s < 40e-6
        assert fit.allreduce_s > 2.5 * NVLINK_LATENCY_S


def test_tp_comm_checks_every_argument_even_at_tp_1():
    # At TP=1 no link is used, yet a bad link figure or GPU used to return 0.0 quietly.
    for kwargs, err, name in (({"latency_s": -1}, ValueError, "latency_s"),
                              ({"bandwidth_Bps": "x"}, TypeError, "bandwidth_Bps"),
                              ({"bandwidth_Bps": 0}, ValueError, "bandwidth_Bps")):
        for tp in (1, 2):
            with pytest.raises(err, match=name):
                tp_comm_time_s(LLAMA70, "h100-sxm", 1, tp, **kwargs)
    with pytest.raises(TypeError, match="gpu must be a GPUSpec or a preset name"):
        tp_comm_time_s(LLAMA70, None, 1, 1)
    assert tp_comm_time_s(LLAMA70, "h100-sxm", 1, 1) == 0.0


def test_tp_comm_rejects_degrees_the_heads_cannot_split():
    # predict_tpot_s rejected TP=3 while the communication of the same step accepted it.
    for f in (lambda: tp_comm_time_s(LLAMA70, "h100-sxm", 1, 3),
              lambda: predict_tpot_s(LLAMA70, "h100-sxm", 1, 100, tp_degree=3),
              lambda: decode_step(LLAMA70, "h100-sxm", 1, 100, tp_degree=128)):
        with pytest.raises(ValueError, match=r"valid degrees: 1, 2, 4, 8, 16, 32, 64"):
            f()
    ds = get_model("deepseek-v3")                 # MLA: a replicated latent, yet 128 heads to split
    for tp in (3, 1000):
        with pytest.raises(ValueError, match=rf"tp_degree \({tp}\) must split deepseek-v3's 128 attention heads"):
            predict_tpot_s(ds, "h100-sxm", 1, 100, tp_degree=tp)


@pytest.mark.parametrize("comm", ["yes", "no", 1, None])
def test_decode_step_comm_must_be_a_bool(comm):
    with pytest.raises(TypeError, match="comm must be True or False"):
        decode_step(LLAMA70, "h100-sxm", 1, 100, tp_degree=2, comm=comm)
