"""Model presets, config parsing and accelerator datasheets."""
import json
import math

import pytest

from servelib.hardware import GPUSpec, get_gpu, list_gpus, ridge_point
from servelib.models import ModelSpec, get_model, list_models
from servelib.units import GiB, KiB, fmt_bytes

# Published parameter counts, to 0.5%. Model cards give most of these only as the nominal
# size in the name, so the counts are the "Model size" that Hugging Face model pages compute
# from the published safetensors (llama-3-70b: 70.6B on the pages of Llama 3.x 70B copies;
# falcon-7b: 6.92B on a safetensors conversion), except Mixtral's (Mistral AI's Mixtral
# announcement: 46.7B) and Qwen2.5-7B's (its model card: 7.61B).
PUBLISHED_PARAMS = {"llama-2-70b": 68.98e9, "llama-3-70b": 70.6e9, "llama-3-8b": 8.03e9,
                    "llama-2-7b": 6.74e9, "mistral-7b": 7.24e9, "mixtral-8x7b": 46.7e9,
                    "qwen2.5-7b": 7.61e9, "falcon-7b": 6.92e9}


def test_presets_include_the_eight_first_named_and_every_family_of_today():
    assert set(PUBLISHED_PARAMS) <= set(list_models())
    kinds = {get_model(n).attention for n in list_models()}
    assert {"MHA", "GQA", "MQA", "MLA"} <= kinds
    assert any(get_model(n).count_layers("sliding") for n in list_models())
    assert any(get_model(n).count_layers("state") for n in list_models())
    assert {"qwen2-57b-a14b", "deepseek-v3"} <= set(list_models())     # MoE with shared experts
    assert len(list_models()) >= 8 + 12


@pytest.mark.parametrize("name,params", sorted(PUBLISHED_PARAMS.items()))
def test_parameter_counts_match_published(name, params):
    m = get_model(name)
    assert m.n_params == pytest.approx(params, rel=5e-3)
    assert m.source.startswith("https://huggingface.co/")


def test_attention_kinds():
    kinds = {n: get_model(n).attention for n in list_models()}
    assert kinds["llama-2-7b"] == "MHA" and kinds["falcon-7b"] == "MQA"
    assert kinds["llama-3-70b"] == "GQA" and get_model("llama-3-70b").group_size == 8


def test_mixtral_keeps_total_and_active():
    m = get_model("mixtral-8x7b")
    assert (m.n_experts, m.n_experts_per_token) == (8, 2)
    assert m.n_active_params == pytest.approx(12.9e9, rel=5e-3)
    assert m.n_params > 3 * m.n_active_params


def test_get_model_case_insensitive_and_unknown_lists_known():
    assert get_model("LLaMA-3-70B") == get_model("llama-3-70b")
    with pytest.raises(KeyError, match="known models: .*falcon-7b"):
        get_model("gpt-5")
    with pytest.raises(TypeError, match="name"):
        get_model(70)


def test_from_hf_config_reads_head_dim_when_present(tmp_path):
    # head_dim 256 with hidden/heads = 128: the config's head_dim must win.
    cfg = {"num_hidden_layers": 2, "hidden_size": 2048, "num_attention_heads": 16,
           "num_key_value_heads": 4, "head_dim": 256, "intermediate_size": 4096,
           "vocab_size": 1000, "hidden_act": "silu"}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    m = ModelSpec.from_hf_config(p)
    assert m.head_dim == 256 and m.n_kv_heads == 4


def test_from_hf_config_defaults_mha_and_multi_query():
    base = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 8,
            "intermediate_size": 128, "vocab_size": 10}
    assert ModelSpec.from_hf_config(base).n_kv_heads == 8
    assert ModelSpec.from_hf_config({**base, "multi_query": True}).n_kv_heads == 1
    with pytest.raises(KeyError, match="vocab_size"):
        ModelSpec.from_hf_config({k: v for k, v in base.items() if k != "vocab_size"})


def test_hand_counted_parameters_of_a_tiny_config():
    # 1 layer, hidden 4, 2 heads of 2, 1 KV head, gated MLP 8, vocab 10, untied.
    cfg = {"num_hidden_layers": 1, "hidden_size": 4, "num_attention_heads": 2,
           "num_key_value_heads": 1, "intermediate_size": 8, "vocab_size": 10, "hidden_act": "silu"}
    attn = 4 * 4 + 4 * 2 + 4 * 2 + 4 * 4      # q, k, v, o
    mlp = 3 * 4 * 8
    norms = 2 * 4 + 4                        # two per layer, one final
    embed = 2 * 10 * 4
    assert ModelSpec.from_hf_config(cfg).n_params == attn + mlp + norms + embed


def test_with_kv_heads_makes_mha_and_mqa_variants():
    m = get_model("llama-3-70b")
    mha, mqa = m.with_kv_heads(64), m.with_kv_heads(1)
    assert (mha.attention, mqa.attention) == ("MHA", "MQA")
    # K and V projections grow by 2 * L * hidden * d * (64 - 8).
    assert mha.n_params - m.n_params == 2 * 80 * 8192 * 128 * 56
    with pytest.raises(ValueError, match="n_heads"):
        m.with_kv_heads(7)


def test_gpu_presets_and_sources():
    assert list_gpus() == sorted(["a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200",
                                  "l4", "t4", "l40s", "mi300x", "b200", "rtx-4090", "rtx-3090",
                                  "a10", "a10g", "l40", "h20", "mi325x"])
    for name in list_gpus():
        g = get_gpu(name)
        assert g.source and g.hbm_bandwidth_Bps > 1e11 and g.memory_bytes >= 16 * GiB


def test_ridge_points():
    assert ridge_point("h100-sxm", "bf16") == pytest.approx(295.4, abs=0.1)
    assert round(ridge_point(get_gpu("a100-80gb"), "fp16")) == 153
    assert round(ridge_point("h200", "bf16")) == 206
    assert round(ridge_point("t4", "fp16")) == 203
    with pytest.raises(ValueError, match="bf16"):
        ridge_point("t4", "bf16")              # the T4 has no bf16 tensor cores
    # Readers' cards, dense rates: the H20 has H100-class bandwidth and ~15% of its arithmetic.
    assert round(ridge_point("h20", "bf16")) == 37
    assert round(ridge_point("rtx-4090", "bf16")) == 164 and round(ridge_point("rtx-3090", "fp16")) == 76
    assert round(ridge_point("a10", "bf16")) == 208 and round(ridge_point("l40", "fp8")) == 419
    assert round(ridge_point("mi325x", "bf16")) == 218


def test_gpuspec_validates():
    with pytest.raises(ValueError, match="hbm_bandwidth_Bps"):
        GPUSpec("x", 1e9, -1.0)
    with pytest.raises(ValueError, match="flops dtype"):
        GPUSpec("x", 1e9, 1e9, {"int4": 1e12})


def test_units_and_formatting():
    assert (KiB, GiB) == (1024, 2**30)
    assert fmt_bytes(327680) == "320 KiB"
    assert fmt_bytes(2.5 * GiB) == "2.5 GiB"
    assert fmt_bytes(80e9, binary=False) == "80 GB"
    assert fmt_bytes(0) == "0 B"
    with pytest.raises(ValueError, match="n must be >= 0"):
        fmt_bytes(-1)
    with pytest.raises(TypeError):
        fmt_bytes("1 GB")
    assert math.isclose(80e9 / GiB, 74.5, abs_tol=0.05)   # the GB-vs-GiB trap
