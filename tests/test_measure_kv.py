"""The memory a real decode run's KV cache takes, measured on the device at hand, against the formula."""
import json
import subprocess
import sys

import pytest

from servelib.measure import kv_toy_spec, measure_kv_cache, pick_device
from servelib.memory import kv_bytes_per_token
from servelib.units import MiB


def test_pick_device_reports_a_known_kind():
    d = pick_device()
    assert d.kind in ("cuda", "mps", "cpu") and d.torch
    assert pick_device("cpu").kind == "cpu"
    with pytest.raises(ValueError, match="prefer"):
        pick_device("tpu")


def test_kv_toy_is_cache_heavy():
    s = kv_toy_spec()
    assert kv_bytes_per_token(s) == 16 * 1024 and s.n_kv_heads == s.n_heads == 8
    assert s.n_params < 25e6


def test_measured_kv_memory_matches_formula():
    # The process's resident memory (counted by the kernel, not by servelib) grows by the
    # bytes the formula predicts when a decode run fills its cache: 64 MiB here.
    # A wide margin: allocator slack is a few MiB at most; a formula off by a factor (heads
    # for KV heads, K without V) would land far outside it. The run gets a process of its
    # own, as a reader's notebook does: inside this test session, memory freed by earlier
    # tests can go back to the system during the counted run and hide part of the cache.
    code = ("import json; from servelib.measure import measure_kv_cache, pick_device; "
            "m = measure_kv_cache(4, 1024, device=pick_device('cpu')); "
            "print(json.dumps([m.formula_bytes, m.measured_bytes, m.method, m.driver_bytes]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    formula, measured, method, driver = json.loads(out.stdout.strip().splitlines()[-1])
    assert formula == kv_bytes_per_token(kv_toy_spec()) * 4 * 1024 == 64 * MiB
    assert measured == pytest.approx(formula, rel=0.15)
    assert method == "resident memory of this process" and driver is None


def test_measure_kv_rejects_bad_sizes():
    with pytest.raises(ValueError, match="batch"):
        measure_kv_cache(0, 512)
    with pytest.raises(ValueError, match="n_decode"):
        measure_kv_cache(2, 8, n_decode=8)
