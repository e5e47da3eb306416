"""The measurements behind the quantization and speculative-decoding chapters, at tiny sizes.

No timing is asserted: only that the figures exist, are positive and finite, and agree with
the byte counts and formulas they are built from; and that the kernels compute the right
numbers (an int8 product against its dequantized matrix, a verification pass against
decoding the same tokens one at a time).
"""
import math

import pytest
import torch

from servelib.hardware import GPUSpec
from servelib.measure import Ceilings, ToyDecoder, pick_device, toy_spec
from servelib.measure.quant import quantize_int8, time_weight_only_gemv
from servelib.measure.speculative import ceilings_spec, draft_spec, speculative_sweep
from servelib.measure.timer import time_interleaved
from servelib.speculative import expected_tokens_per_step

CPU = pick_device("cpu")
CEIL = Ceilings(copy_bandwidth_Bps=1e10, matmul_flops=1e11, dtype="fp32")


@pytest.fixture(scope="module")
def toy():
    return ToyDecoder(toy_spec(CPU, "tiny"), CPU, "fp32")


def test_int8_rounding_error_is_at_most_half_a_step():
    w = torch.randn(64, 128, generator=torch.Generator().manual_seed(0))
    q, s = quantize_int8(w)
    assert q.dtype == torch.int8 and q.shape == w.shape and s.shape == (64,)
    assert (q.float() * s[:, None] - w).abs().max() <= s.max() / 2 + 1e-6
    assert q.abs().max() == 127
    with pytest.raises(ValueError, match="matrix"):
        quantize_int8(torch.ones(4))


@pytest.mark.skipif(not hasattr(torch.ops.aten, "_weight_int8pack_mm"), reason="no int8 weight-only kernel")
def test_fused_int8_kernel_computes_the_dequantized_product():
    g = torch.Generator().manual_seed(1)
    w, x = torch.randn(96, 64, generator=g), torch.randn(3, 64, generator=g)
    q, s = quantize_int8(w)
    out = torch.ops.aten._weight_int8pack_mm(x, q, s)
    torch.testing.assert_close(out, x @ (q.float() * s[:, None]).T, rtol=1e-4, atol=1e-4)


def test_gemv_comparison_counts_its_bytes():
    r = time_weight_only_gemv(CPU, size=256, n_matrices=2, dtype="fp32", repeats=2, min_run_time=0.01,
                              copy_bandwidth=1e10)
    assert r.wide.weight_bytes == 2 * 256 * 256 * 4
    assert r.int8.weight_bytes == 2 * (256 * 256 + 256 * 4)            # int8 weights + fp32 row scales
    assert r.byte_ratio == r.wide.weight_bytes / r.int8.weight_bytes
    for t in (r.wide, r.int8):
        assert math.isfinite(t.step_s) and t.step_s > 0
        assert t.bytes_per_s == pytest.approx(t.weight_bytes / t.step_s)
        assert t.predicted_step_s == t.weight_bytes / 1e10
    assert r.speedup == pytest.approx(r.wide.step_s / r.int8.step_s)
    assert r.int8.kernel in ("aten._weight_int8pack_mm", "dequantize then F.linear")
    with pytest.raises(ValueError, match="size"):
        time_weight_only_gemv(CPU, size=0, copy_bandwidth=1e10)


def test_verification_pass_equals_decoding_the_tokens_one_by_one(toy):
    # The pass over k + 1 tokens after a cached prefix must be causal: its logits at each
    # position are those of a decode step that has seen exactly the tokens before it.
    toks = toy.tokens(2, 9, seed=3)
    cache = toy.new_cache(2, 9)
    toy.forward(toks[:, :4], cache, 0)
    block = toy.forward(toks[:, 4:], cache, 4, all_logits=True)
    assert block.shape == (2, 5, toy.spec.vocab_size)
    step_cache = toy.new_cache(2, 9)
    toy.forward(toks[:, :4], step_cache, 0)
    for i in range(5):
        step = toy.forward(toks[:, 4 + i:5 + i], step_cache, 4 + i)
        torch.testing.assert_close(block[:, i], step, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(toy.forward(toks[:, 4:], cache, 4), block[:, -1])


def test_draft_spec_is_a_smaller_model_with_the_same_vocabulary():
    target = toy_spec(CPU, "full")
    d = draft_spec(target)
    assert d.vocab_size == target.vocab_size and d.n_layers == 2 and d.hidden_size == target.hidden_size // 2
    assert 0.05 < d.n_params / target.n_params < 0.2
    with pytest.raises(TypeError, match="target"):
        draft_spec("llama-3-8b")


def test_ceilings_become_a_gpu_spec():
    spec = ceilings_spec(CEIL)
    assert isinstance(spec, GPUSpec) and spec.peak_flops("fp32") / spec.hbm_bandwidth_Bps == CEIL.ridge


def test_speculative_sweep_at_tiny_sizes(toy):
    draft = ToyDecoder(draft_spec(toy.spec), CPU, "fp32")
    sw = speculative_sweep(toy, draft, [1, 2], context_len=8, acceptance_rate=0.8, draft_len=3, ceilings=CEIL,
                           repeats=1, min_run_time=0.01)
    assert [p.batch for p in sw.points] == [1, 2]
    for p in sw.points:
        assert p.tokens_per_step == pytest.approx(expected_tokens_per_step(0.8, 3), rel=0.05)
        assert p.speedup == pytest.approx(p.tokens_per_s / p.baseline_tokens_per_s)
        assert min(p.round_s, p.verify_step_s, p.target_step_s, p.predicted_speedup) > 0   # no timing compared
    other = ToyDecoder(toy.spec.scaled(vocab_size=128), CPU, "fp32")
    with pytest.raises(ValueError, match="vocabulary"):
        speculative_sweep(toy, other, [1], context_len=8, acceptance_rate=0.8, draft_len=3, ceilings=CEIL)
    with pytest.raises(ValueError, match="increasing"):
        speculative_sweep(toy, draft, [2, 1], context_len=8, acceptance_rate=0.8, draft_len=3, ceilings=CEIL)


def test_interleaved_timing():
    ts = time_interleaved([lambda: None, lambda: sum(range(100))], CPU, repeats=3, min_run_time=0.001)
    assert [t.n for t in ts] == [3, 3] and all(t.median_s > 0 for t in ts)
    with pytest.raises(ValueError, match="fns"):
        time_interleaved([], CPU)
    with pytest.raises(ValueError, match="repeats"):
        time_interleaved([lambda: None], CPU, repeats=0)
