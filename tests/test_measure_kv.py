"""The KV cache torch allocates equals the formula, on the device at hand."""
import pytest

from servelib.measure import allocate_kv_cache, pick_device
from servelib.memory import kv_bytes_per_token
from servelib.models import get_model


def test_pick_device_reports_a_known_kind():
    d = pick_device()
    assert d.kind in ("cuda", "mps", "cpu") and d.torch
    assert pick_device("cpu").kind == "cpu"
    with pytest.raises(ValueError, match="prefer"):
        pick_device("tpu")


@pytest.mark.parametrize("name", ["llama-3-8b", "falcon-7b", "llama-2-7b"])
def test_allocated_kv_bytes_equal_formula(name):
    m = get_model(name).scaled(n_layers=2) if name != "falcon-7b" else get_model(name)
    a = allocate_kv_cache(m, batch=3, context_len=64, device=pick_device("cpu"))
    assert a.tensor_bytes == a.formula_bytes == kv_bytes_per_token(m) * 3 * 64
    assert a.shape == (m.n_layers, 2, 3, m.n_kv_heads, 64, m.head_dim)


def test_allocate_rejects_bad_sizes():
    with pytest.raises(ValueError, match="batch"):
        allocate_kv_cache(get_model("llama-3-8b"), batch=0, context_len=8)
