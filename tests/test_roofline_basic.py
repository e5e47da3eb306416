"""Generation FLOPs with and without a KV cache (linear vs quadratic)."""
import pytest

from servelib.roofline import generation_flops, prefill_flops


def test_prefill_is_2pn():
    assert prefill_flops(70e9, 1000) == 2 * 70e9 * 1000


def test_cache_makes_generation_linear_and_no_cache_quadratic():
    p, s = 1e9, 100
    with_cache = [generation_flops(p, s, n) for n in (1, 2, 3)]
    assert with_cache == [2e9 * 100, 2e9 * 101, 2e9 * 102]
    # Without a cache: passes over 100, 101, 102 tokens.
    assert generation_flops(p, s, 3, kv_cache=False) == 2e9 * (100 + 101 + 102)
    big = generation_flops(p, s, 10_000, kv_cache=False) / generation_flops(p, s, 10_000)
    assert big > 40


def test_generation_rejects_bad_input():
    with pytest.raises(ValueError, match="n_new_tokens"):
        generation_flops(1e9, 10, 0)
