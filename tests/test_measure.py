"""servelib.measure on a CPU, at tiny sizes: positive finite figures, clean OOM stops, profiles round-trip.

No timing is asserted: only that figures exist, are finite and positive, and are consistent
with the formulas they are divided by.
"""
import json
import math

import pytest
import torch

from servelib.measure import (Ceilings, ToyDecoder, batching_sweep, copy_bandwidth_Bps, is_out_of_memory,
                              load_profile, load_profiles, matmul_flops, pick_device, save_profile,
                              time_call, time_decode, time_prefill, toy_spec)
from servelib.measure import phases, profile
from servelib.memory import kv_bytes_per_sequence

CPU = pick_device("cpu")
CEIL = Ceilings(copy_bandwidth_Bps=1e10, matmul_flops=1e11, dtype="fp32")


@pytest.fixture(scope="module")
def toy():
    return ToyDecoder(toy_spec(CPU, "tiny"), CPU, "fp32")


def finite_positive(x):
    return isinstance(x, float) and math.isfinite(x) and x > 0


def test_device_prints_as_the_line_beside_every_figure():
    assert str(CPU) == f"cpu ({CPU.name}), dtype {CPU.dtype}, torch {torch.__version__}"
    assert CPU.dtype in {"bf16", "fp32"}


def test_timer_and_ceilings_are_positive_and_finite():
    t = time_call(lambda: torch.ones(1000).sum(), CPU, min_run_time=0.01)
    assert finite_positive(t.median_s) and t.n >= 1
    assert finite_positive(copy_bandwidth_Bps(CPU, 1 << 20, min_run_time=0.01))
    assert finite_positive(matmul_flops(CPU, "fp32", 64, min_run_time=0.01))
    with pytest.raises(ValueError, match="dtype"):
        matmul_flops(CPU, "fp64", 8)
    assert CEIL.ridge == 10


def test_toy_model_has_its_spec_parameter_count_and_kv_shape(toy):
    assert toy.n_params == toy.spec.n_params
    s = toy.spec
    assert s.n_heads > s.n_kv_heads  # GQA
    cache = toy.new_cache(3, 5)
    assert cache.shape == (s.n_layers, 2, 3, s.n_kv_heads, 5, s.head_dim)
    assert cache.numel() * cache.element_size() == 3 * kv_bytes_per_sequence(s, 5, 4)
    logits = toy.forward(toy.tokens(3, 4), cache, 0)
    assert logits.shape == (3, s.vocab_size) and torch.isfinite(logits).all()


def test_decode_with_cache_matches_a_full_prefill(toy):
    # The last token's logits are the same whether the prompt is run at once or the last token
    # is decoded over the cache of the others: the cache is used correctly.
    toks = toy.tokens(2, 6, seed=1)
    full = toy.forward(toks, toy.new_cache(2, 6), 0)
    cache = toy.new_cache(2, 6)
    toy.forward(toks[:, :5], cache, 0)
    step = toy.forward(toks[:, 5:], cache, 5)
    torch.testing.assert_close(step, full, rtol=1e-4, atol=1e-4)


def test_prefill_and_decode_figures(toy):
    p = time_prefill(toy, 8, 1, CEIL, min_run_time=0.01)
    d = time_decode(toy, 8, 2, CEIL, min_run_time=0.01)
    for r in (p, d):
        for f in (r.step_s, r.s_per_token, r.flops, r.bytes_moved, r.achieved_flops, r.achieved_Bps,
                  r.predicted_step_s, r.predicted_serial_s):
            assert finite_positive(f)
        assert r.achieved_flops == pytest.approx(r.flops / r.step_s)
    assert p.s_per_token == pytest.approx(p.step_s / 8)
    assert d.predicted_step_s < d.predicted_serial_s <= 2 * d.predicted_step_s
    assert d.bytes_moved == toy.weights_read_bytes + 2 * toy.kv_bytes_per_sequence(9)
    assert time_prefill(toy, 8, 1, min_run_time=0.01).predicted_step_s is None


def test_sweep_runs_every_batch(toy):
    lines = []
    s = batching_sweep(toy, [1, 2, 4], 4, CEIL, min_run_time=0.01, progress=lines.append)
    assert [p.batch for p in s.points] == [1, 2, 4] and s.stopped_at is None
    assert all(finite_positive(p.tokens_per_s) and p.tokens_per_s == pytest.approx(p.batch / p.step_s)
               for p in s.points)
    assert len(lines) == 3
    with pytest.raises(ValueError, match="increasing"):
        batching_sweep(toy, [4, 2], 4)


@pytest.mark.parametrize("error", [torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
                                   RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried ...")])
def test_out_of_memory_stops_the_sweep_cleanly(toy, monkeypatch, error):
    real = phases.time_decode

    def fake(model, context_len, batch=1, ceilings=None, **kw):
        if batch >= 8:
            raise error
        return real(model, context_len, batch, ceilings, **kw)

    monkeypatch.setattr(phases, "time_decode", fake)
    s = batching_sweep(toy, [1, 2, 4, 8, 16], 4, CEIL, min_run_time=0.01)
    assert [p.batch for p in s.points] == [1, 2, 4]
    assert s.stopped_at == 8 and s.stop_reason


def test_other_errors_are_not_mistaken_for_out_of_memory(toy, monkeypatch):
    assert not is_out_of_memory(RuntimeError("shape mismatch"))
    monkeypatch.setattr(phases, "time_decode", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("shape mismatch")))
    with pytest.raises(RuntimeError, match="shape"):
        batching_sweep(toy, [1, 2], 4)


def test_profile_round_trips(tmp_path, monkeypatch):
    # The 'quick' CPU plan with the tiny model and two batches, so the test takes a second.
    monkeypatch.setitem(profile._PLAN, ("cpu", True),
                        dict(size="tiny", prompt_len=8, context_len=8, batches=(1, 2)))
    monkeypatch.setattr(profile, "measure_ceilings", lambda dev, dtype: Ceilings(1e10, 1e11, dtype))
    prof = profile.measure_profile(quick=True, device=CPU, dtype="fp32")
    for k in profile.REQUIRED:
        assert k in prof
    assert finite_positive(prof["prefill"]["s_per_token"]) and finite_positive(prof["decode"]["achieved_Bps"])
    assert [p["batch"] for p in prof["batching_sweep"]] == [1, 2]
    path = save_profile(prof, tmp_path / "sub" / "cpu.json")
    assert load_profile(path) == json.loads(json.dumps(prof))
    assert [p["file"] for p in load_profiles(tmp_path / "sub")] == ["cpu.json"]
    assert load_profiles(tmp_path / "missing") == []
    (tmp_path / "sub" / "bad.json").write_text("{}")
    with pytest.raises(KeyError, match="missing"):
        load_profiles(tmp_path / "sub")


def test_cli_writes_a_profile(tmp_path, monkeypatch, capsys):
    from servelib.measure.__main__ import main
    monkeypatch.setattr("servelib.measure.__main__.measure_profile",
                        lambda **kw: {"device": {"name": "x"}, "quick": kw["quick"]})
    assert main(["--quick", "--out", str(tmp_path / "p.json")]) == 0
    assert json.loads((tmp_path / "p.json").read_text())["quick"] is True
    assert "wrote" in capsys.readouterr().out


def test_packed_weights_compute_what_plain_weights_compute(monkeypatch):
    packed = ToyDecoder(toy_spec(CPU, "tiny"), CPU, "fp32", seed=3)
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    plain = ToyDecoder(toy_spec(CPU, "tiny"), CPU, "fp32", seed=3)
    assert not plain.packed and plain.n_params == packed.n_params
    toks = packed.tokens(2, 5, seed=2)
    torch.testing.assert_close(packed.forward(toks, packed.new_cache(2, 5), 0),
                               plain.forward(toks, plain.new_cache(2, 5), 0), rtol=1e-4, atol=1e-4)
