"""servelib.measure.mixed on a CPU at a tiny size: the sweep's work and predictions, no timing asserted."""
import math

import pytest

from servelib.measure import Ceilings, pick_device
from servelib.measure.mixed import default_d_model, token_sweep
from servelib.roofline import serial_step_time_s, step_time_s

CPU = pick_device("cpu")
CEIL = Ceilings(copy_bandwidth_Bps=1e10, matmul_flops=1e11, dtype="fp32")


def test_sweep_counts_the_work_of_a_linear_layer():
    pts = token_sweep([1, 8, 64], d_model=128, device=CPU, dtype="fp32", ceilings=CEIL, min_run_time=0.01)
    assert [p.tokens for p in pts] == [1, 8, 64]
    for p in pts:
        assert math.isfinite(p.step_s) and p.step_s > 0
        assert p.flops == 2 * p.tokens * 128 ** 2
        assert p.bytes_moved == (128 * 128 + 2 * p.tokens * 128) * 4
        assert p.predicted_step_s == step_time_s(p.flops, p.bytes_moved, 1e11, 1e10)
        assert p.predicted_serial_s == serial_step_time_s(p.flops, p.bytes_moved, 1e11, 1e10)
    assert token_sweep([2], d_model=16, device=CPU, dtype="fp32", min_run_time=0.01)[0].predicted_step_s is None


def test_default_sizes_exceed_caches():
    assert default_d_model(CPU) == 4096


@pytest.mark.parametrize("tokens, exc", [([], ValueError), ([4, 2], ValueError), ([0], ValueError),
                                         (3, TypeError), ([1.5], TypeError)])
def test_bad_token_lists(tokens, exc):
    with pytest.raises(exc, match="tokens"):
        token_sweep(tokens, d_model=16, device=CPU, dtype="fp32", min_run_time=0.01)


def test_bad_d_model():
    with pytest.raises(ValueError, match="d_model"):
        token_sweep([1], d_model=0, device=CPU, dtype="fp32", min_run_time=0.01)
