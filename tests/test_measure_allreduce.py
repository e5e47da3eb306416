"""An all-reduce across two CPU processes (gloo), at a decode step's message sizes."""
import pytest

from servelib.measure import time_allreduce


def test_gloo_allreduce_runs_and_reports_its_setup():
    rows = time_allreduce([8 * 1024, 256 * 1024], world_size=2, backend="gloo", repeats=5, warmup=1)
    assert [r.message_bytes for r in rows] == [8 * 1024, 256 * 1024]
    for r in rows:
        assert (r.backend, r.device, r.world_size, r.dtype, r.n) == ("gloo", "cpu", 2, "bf16", 5)
        assert r.median_s > 0 and r.iqr_s >= 0 and r.torch
        # Two devices: each sends the whole message once, so bus and algorithm bandwidth agree.
        assert r.busbw_Bps == pytest.approx(r.algbw_Bps) == pytest.approx(r.message_bytes / r.median_s)


def test_allreduce_rejects_bad_setups():
    with pytest.raises(ValueError, match="world_size"):
        time_allreduce([1024], world_size=1)
    with pytest.raises(ValueError, match="sizes_bytes"):
        time_allreduce([])
    with pytest.raises(ValueError, match="element"):
        time_allreduce([1], dtype="fp32")
    with pytest.raises(ValueError, match="nccl"):
        time_allreduce([1024], world_size=64, backend="nccl")
