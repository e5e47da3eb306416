"""Today's model families read from their published config.json (tests/data/*.json, each with
its source): parameter counts against the published counts, KV bytes exact against the figure
derived by hand from the fields and, where a public log exists, against the log."""
import json
import pathlib
import warnings

import pytest

from servelib.hf_config import parse_hf_config
from servelib.memory import (capacity, kv_bytes_per_sequence, kv_bytes_per_token, longest_sequence_tokens,
                             weight_bytes)
from servelib.models import LayerSpec, ModelSpec, get_model, list_models
from servelib.units import GiB, KiB, MiB

DATA = pathlib.Path(__file__).parent / "data"

# Published total parameter counts, each with where it is published; servelib's count is
# within 1%. Where a model card gives only the nominal size in the name (Phi-4's "14B",
# GLM-4-9B, Falcon-7B's "7B"), the count is the "Model size" the Hugging Face page computes
# from the published safetensors, and says so.
_HF_COUNT = "Hugging Face model page, Safetensors 'Model size' (counted from the published weights)"
PUBLISHED_TOTAL = {
    "mistral-7b-v0.1": (7.3e9, "Mistral AI, Announcing Mistral 7B: 'a 7.3B parameter model'"),
    "mixtral-8x7b": (46.7e9, "Mistral AI, Mixtral of experts: '46.7B total parameters', 12.9B per token"),
    "llama-3.2-1b": (1.23e9, "Llama 3.2 model card (meta-llama/llama-models, models/llama3_2/MODEL_CARD.md): "
                             "'1B (1.23B)'"),
    "llama-3.1-405b": (405e9, "Llama 3.1 model card: 405B"),
    "qwen3-8b": (8.2e9, "Qwen3-8B model card: 8.2B (6.95B non-embedding)"),
    "qwen3-30b-a3b": (30.5e9, "Qwen3-30B-A3B model card: 30.5B in total, 3.3B activated"),
    "qwen3-235b-a22b": (235e9, "Qwen3-235B-A22B model card: 235B in total, 22B activated"),
    "qwen2-57b-a14b": (57.41e9, "Qwen2 release blog (qwenlm.github.io/blog/qwen2), model table: 57.41B"),
    "qwen3-next-80b-a3b": (80e9, "Qwen3-Next-80B-A3B model card: 80B in total, 3B activated"),
    "deepseek-v2-lite": (15.7e9, "DeepSeek-V2-Lite model card: 15.7B total, 2.4B activated"),
    # Main model; the 14B multi-token-prediction module is left out.
    "deepseek-v3": (671e9, "DeepSeek-V3 README (github.com/deepseek-ai/DeepSeek-V3): 671B main model + 14B MTP"),
    "gemma-2-9b": (917_504_000 + 8_324_201_984, "Gemma 2 report, table 2: 917,504,000 embedding + "
                                                "8,324,201,984 non-embedding"),
    # Language model: 25,600M non-embedding + 1,410M embedding (the report's 1,416M embedding
    # figure also holds the 6M image projector).
    "gemma-3-27b": (27.0e9, "Gemma 3 report, table 1: 25,600M non-embedding + 1,416M embedding"),
    "phi-3-mini": (3.8e9, "Phi-3 technical report: 'phi-3-mini, a 3.8 billion parameter language model'"),
    "phi-4": (14.7e9, _HF_COUNT + " (mlx-community/phi-4-bf16, a bf16 copy): 14.7B; the six published "
                                  "bf16 shards hold 29.3 GB, 14.66B parameters"),
    "glm-4-9b": (9.4e9, _HF_COUNT + ": 9.4B"),
    "gpt-oss-20b": (20.91e9, "gpt-oss model card (arXiv:2508.10925), table 1: 20.91B total, 3.61B active"),
    "gpt-oss-120b": (116.83e9, "gpt-oss model card (arXiv:2508.10925), table 1: 116.83B total, 5.13B active"),
    "falcon-7b": (6.92e9, _HF_COUNT + " (SaffalPoosh/falcon-7b_safetensors, a conversion): 6.92B"),
    "qwen2.5-7b": (7.61e9, "Qwen2.5-7B model card: 7.61B (6.53B non-embedding)"),
    "llama-3-70b": (70e9, "Llama 3 model card: 70B"),
}


def _load(name):
    return json.loads((DATA / f"{name}.json").read_text())


def test_every_data_file_names_its_source_and_matches_its_preset():
    for path in sorted(DATA.glob("*.json")):
        cfg = json.loads(path.read_text())
        assert cfg["_source"].startswith("https://huggingface.co/"), path.name
        if path.stem in list_models():
            assert ModelSpec.from_hf_config(path, name=path.stem) == get_model(path.stem), path.stem


@pytest.mark.parametrize("name", sorted(PUBLISHED_TOTAL))
def test_parameter_counts_within_one_percent_of_published(name):
    published, where = PUBLISHED_TOTAL[name]
    m = ModelSpec.from_hf_config(DATA / f"{name}.json")
    assert m.n_params == pytest.approx(published, rel=0.01), where


def test_gemma2_count_is_the_reports_exactly():
    # The Gemma 2 report counts to the parameter: embedding + non-embedding, norms included.
    assert get_model("gemma-2-9b").n_params == 917_504_000 + 8_324_201_984


def test_every_preset_says_what_its_fields_were_checked_against():
    # A preset's source line names the copy of the published config its fields were read
    # against, or says that no copy was found; never a bare URL that implies a reading.
    for name in list_models():
        src = get_model(name).source
        assert "fields checked against https://" in src or "not checked against a published copy" in src, name


def test_active_parameters_of_mixtures_of_experts():
    # Published active counts. gpt-oss and DeepSeek count the unembedding but not the input
    # embedding (a lookup, no matmul); servelib's n_active_params includes both, so add it.
    assert get_model("mixtral-8x7b").n_active_params == pytest.approx(12.9e9, rel=0.005)
    assert get_model("qwen2-57b-a14b").n_active_params == pytest.approx(14e9, rel=0.02)
    assert get_model("qwen3-30b-a3b").n_active_params == pytest.approx(3.3e9, rel=0.02)   # given to 2 digits
    assert get_model("qwen3-235b-a22b").n_active_params == pytest.approx(22e9, rel=0.01)
    assert get_model("gpt-oss-20b").n_active_params == pytest.approx(3.61e9 + 201088 * 2880, rel=0.005)
    assert get_model("gpt-oss-120b").n_active_params == pytest.approx(5.13e9 + 201088 * 2880, rel=0.005)
    assert get_model("deepseek-v3").n_active_params == pytest.approx(37e9 + 129280 * 7168, rel=0.01)


# ---- the failing inputs, each with its right value --------------------------------------

def test_qwen3_moe_reads_expert_width():
    # Was 233.5B total / 16.0B active (the dense intermediate_size taken for each expert).
    m = ModelSpec.from_hf_config(DATA / "qwen3-30b-a3b.json")
    assert (round(m.n_params / 1e9, 1), round(m.n_active_params / 1e9, 1)) == (30.5, 3.4)
    assert (m.n_experts, m.n_experts_per_token, m.intermediate_size, m.n_moe_layers) == (128, 8, 768, 48)
    # vLLM's log at TP=4: "Loading weights took 14.25 GiB" per rank.
    assert weight_bytes(m) / 4 / GiB == pytest.approx(14.25, rel=0.005)


def test_moe_family_keys_shared_experts_and_dense_first_layers():
    base = {"model_type": "deepseek_v3", "num_hidden_layers": 4, "hidden_size": 8, "num_attention_heads": 2,
            "num_key_value_heads": 2, "head_dim": 4, "intermediate_size": 32, "moe_intermediate_size": 4,
            "n_routed_experts": 4, "num_experts_per_tok": 2, "vocab_size": 10, "tie_word_embeddings": False}
    dense_first = parse_hf_config({**base, "first_k_dense_replace": 1})
    assert dense_first["n_moe_layers"] == 3
    shared = parse_hf_config({**base, "n_shared_experts": 1})
    plain = parse_hf_config(base)
    assert shared["n_params"] - plain["n_params"] == 4 * 3 * 8 * 4           # one expert a layer
    assert shared["n_active_params"] - plain["n_active_params"] == 4 * 3 * 8 * 4
    qwen = {**base, "model_type": "qwen2_moe", "num_experts": 4, "n_routed_experts": None}
    assert parse_hf_config({**qwen, "mlp_only_layers": [0, 2]})["n_moe_layers"] == 2
    assert parse_hf_config({**qwen, "decoder_sparse_step": 2})["n_moe_layers"] == 2
    gate = parse_hf_config({**qwen, "shared_expert_intermediate_size": 16})
    assert gate["n_params"] - parse_hf_config(qwen)["n_params"] == 4 * (3 * 8 * 16 + 8)   # + sigmoid gate


def test_glm4_kv_heads_and_padded_vocab():
    # Was 655,360 B/token (treated as MHA). vLLM held 53,376 tokens in 2.04 GiB.
    m = ModelSpec.from_hf_config(DATA / "glm-4-9b.json")
    assert (m.n_kv_heads, m.head_dim, m.vocab_size, m.intermediate_size) == (2, 128, 151552, 13696)
    assert kv_bytes_per_token(m) == 2 * 40 * 2 * 128 * 2 == 40_960
    assert round(53_376 * kv_bytes_per_token(m) / GiB, 2) == 2.04


def test_falcon_new_decoder_architecture_has_grouped_kv_heads():
    # transformers writes multi_query: true beside num_kv_heads: 8; servelib took 1 (8x too much concurrency).
    m = ModelSpec.from_hf_config(DATA / "falcon-40b.json")
    assert m.n_kv_heads == 8 and kv_bytes_per_token(m) == 2 * 60 * 8 * 64 * 2
    resaved = ModelSpec.from_hf_config({**_load("falcon-40b"), "multi_query": True})   # as re-saved
    assert resaved.n_kv_heads == 8
    assert get_model("falcon-7b").n_kv_heads == 1                       # old architecture: multi_query is MQA
    # Re-saved by transformers, Falcon-7B's config gains num_kv_heads: 71 beside multi_query.
    assert ModelSpec.from_hf_config({**_load("falcon-7b"), "num_kv_heads": 71}).n_kv_heads == 1


def test_gated_mlp_and_tied_embeddings_defaults():
    g = ModelSpec.from_hf_config(DATA / "gemma-2-9b.json")       # GeGLU, no tie key: Gemma ties
    hidden, inter, layers, vocab = 3584, 14336, 42, 256000
    attn = hidden * 256 * (2 * 16 + 2 * 8)
    assert g.n_params == layers * (attn + 3 * hidden * inter + 4 * hidden) + vocab * hidden + hidden
    glm = ModelSpec.from_hf_config(DATA / "glm-4-9b.json")        # swiglu, three matrices
    assert glm.n_params == pytest.approx(9.4e9, rel=0.005)
    with pytest.warns(UserWarning, match="tie_word_embeddings"):
        ModelSpec.from_hf_config({"num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 2,
                                  "intermediate_size": 8, "vocab_size": 10})


def test_gpt_oss_window_layers_cap_the_cache():
    # Was 6,144 MiB at 131,072 tokens (every layer full). Right: 3,072 MiB + 3 MiB of windows.
    m = ModelSpec.from_hf_config(DATA / "gpt-oss-20b.json")
    assert (m.count_layers("full"), m.count_layers("sliding")) == (12, 12)
    full = 12 * 2 * 8 * 64 * 2 * 131_072
    windows = 12 * 2 * 8 * 64 * 2 * 128
    assert kv_bytes_per_sequence(m, 131_072) == full + windows
    assert (full / MiB, windows / MiB) == (3072, 3)
    assert kv_bytes_per_token(m) == 24 * KiB                   # marginal: full layers only
    assert kv_bytes_per_sequence(m, 100) == 24 * 2 * 8 * 64 * 2 * 100   # inside the window, all count


def test_gemma_local_global_patterns():
    g2 = get_model("gemma-2-9b")
    assert [x.kind for x in g2.layer_specs[:4]] == ["sliding", "full", "sliding", "full"]
    g3 = get_model("gemma-3-27b")                               # text_config, pattern 6 by default
    assert (g3.count_layers("full"), g3.count_layers("sliding"), g3.vocab_size) == (10, 52, 262_208)
    per_layer_tok = 2 * 16 * 128 * 2
    assert kv_bytes_per_sequence(g3, 32_768) == per_layer_tok * (10 * 32_768 + 52 * 1024)


def test_mistral_v01_window_and_its_capacity():
    m = get_model("mistral-7b-v0.1")
    assert kv_bytes_per_token(m) == 0                            # beyond 4,096 tokens nothing grows
    assert kv_bytes_per_sequence(m, 32_768) == kv_bytes_per_sequence(m, 4096) == 512 * MiB
    assert longest_sequence_tokens(m, GiB) == float("inf")
    c = capacity(m, "a100-80gb", n_gpus=1, context_len=32_768)
    dense = capacity(get_model("mistral-7b"), "a100-80gb", n_gpus=1, context_len=32_768)
    assert c.concurrency == int(c.kv_budget_bytes_per_device // (512 * MiB)) > 8 * dense.concurrency


def test_mla_latent_is_replicated_not_split_under_tp():
    m = get_model("deepseek-v3")
    assert m.attention == "MLA" and kv_bytes_per_token(m) == 61 * (512 + 64) * 2 == 70_272
    for tp in (1, 2, 8):
        assert kv_bytes_per_token(m, tp_degree=tp) == 70_272
    lite = get_model("deepseek-v2-lite")
    assert kv_bytes_per_sequence(lite, 1000, tp_degree=4) == 27 * 576 * 2 * 1000
    with pytest.raises(ValueError, match="MLA"):
        m.with_kv_heads(8)


def test_hybrid_linear_attention_keeps_a_fixed_state():
    m = get_model("qwen3-next-80b-a3b")
    assert (m.count_layers("full"), m.count_layers("state")) == (12, 36)
    state = (2 * 16 * 128 + 32 * 128) * 3 + 32 * 128 * 128          # conv + recurrent, per layer
    full_tok = 12 * 2 * 2 * 256 * 2
    for ctx in (1, 4096, 262_144):
        assert kv_bytes_per_sequence(m, ctx) == full_tok * ctx + 36 * state * 2
    # Under TP=2 the state's heads split; the two KV heads split too.
    assert kv_bytes_per_sequence(m, 10, tp_degree=2) == full_tok / 2 * 10 + 36 * state
    assert m.n_params == pytest.approx(80e9, rel=0.01)


def test_multimodal_text_config_is_read():
    cfg = {"model_type": "llava", "vision_config": {"hidden_size": 1024},
           "text_config": {**_load("llama-3-70b"), "_source": None}}
    m = ModelSpec.from_hf_config(cfg)
    assert kv_bytes_per_token(m) == 320 * KiB and m.n_params == get_model("llama-3-70b").n_params


def test_unmodelled_keys_and_layer_types_are_named():
    base = _load("llama-3-70b")
    for key, value in (("attention_chunk_size", 8192), ("mamba_d_state", 16), ("index_topk", 2048)):
        with pytest.raises(ValueError, match=key):
            ModelSpec.from_hf_config({**base, key: value})
    with pytest.raises(ValueError, match=r"layer_types\[1\] = 'mamba'"):
        ModelSpec.from_hf_config({**base, "num_hidden_layers": 2, "layer_types": ["full_attention", "mamba"]})
    with pytest.raises(ValueError, match="one entry per layer"):
        ModelSpec.from_hf_config({**base, "layer_types": ["full_attention"]})
    with pytest.raises(KeyError, match="linear_num_key_heads"):
        ModelSpec.from_hf_config({**base, "full_attention_interval": 4})
    with pytest.raises(ValueError, match="not valid JSON"):
        ModelSpec.from_hf_config('{"num_hidden_layers": 2,')


def test_layer_spec_validates():
    with pytest.raises(ValueError, match="kind"):
        LayerSpec("chunked")
    with pytest.raises(TypeError, match="window"):
        LayerSpec("sliding")
    with pytest.raises(ValueError, match="one LayerSpec per layer"):
        ModelSpec("m", 2, 2, 2, 4, 8, 8, 10, 100, 100, layers=(LayerSpec("full"),))


def test_dense_results_unchanged_and_uniform_layers_spelled_one_way():
    m = get_model("llama-3-70b")
    assert m.layers == () and kv_bytes_per_sequence(m, 8192) == 2.5 * GiB
    explicit = ModelSpec(**{**m.__dict__, "layers": (LayerSpec("full"),) * 80})
    assert explicit == m


def test_warnings_are_not_raised_for_presets():
    # Every preset's config is read without a warning: no key servelib does not understand.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        specs = [get_model(name) for name in list_models()]
    assert [str(w.message) for w in caught] == []
    assert [s.name for s in specs] == list_models() and len(specs) >= 25


# Configs that used to give a quiet wrong number: each now raises naming the config key, or
# (experts with no MoE layer) is counted as the dense model it is.
_TINY = {"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 8,
         "num_key_value_heads": 8, "intermediate_size": 512, "vocab_size": 1000, "tie_word_embeddings": False}


@pytest.mark.parametrize("key", ["tie_word_embeddings", "multi_query", "new_decoder_architecture",
                                 "use_sliding_window", "attn_output_gate"])
@pytest.mark.parametrize("value", ["false", "true", 0, 1])
def test_boolean_config_keys_take_json_booleans_only(key, value):
    # "false" is a truthy string: read with bool() it counted a tied LM head.
    with pytest.raises(TypeError, match=f"config {key} must be a JSON true or false"):
        ModelSpec.from_hf_config({**_TINY, key: value, "sliding_window": 64})


def test_head_dim_must_be_whole_when_not_given():
    with pytest.raises(ValueError, match=r"config hidden_size \(256\) must be a multiple of "
                                         r"num_attention_heads \(7\) when head_dim is absent"):
        ModelSpec.from_hf_config({**_TINY, "num_attention_heads": 7, "num_key_value_heads": 7})
    # More heads than hidden units named the config's keys, not a ModelSpec field.
    with pytest.raises(ValueError, match=r"hidden_size \(256\) must be a multiple of num_attention_heads \(512\)"):
        ModelSpec.from_hf_config({**_TINY, "num_attention_heads": 512})
    with pytest.raises(ValueError, match=r"config n_embd \(256\) must be a multiple of n_head \(7\)"):
        ModelSpec.from_hf_config({"n_layer": 2, "n_embd": 256, "n_head": 7, "vocab_size": 100,
                                  "model_type": "gpt2", "tie_word_embeddings": True})
    # An explicit head_dim need not divide the hidden size (Gemma-2: 16 x 256 != 3584).
    assert ModelSpec.from_hf_config({**_TINY, "num_attention_heads": 7, "num_key_value_heads": 7,
                                     "head_dim": 32}).head_dim == 32


@pytest.mark.parametrize("dense_by", [{"first_k_dense_replace": 99}, {"first_k_dense_replace": 4},
                                      {"mlp_only_layers": [0, 1, 2, 3]}])
def test_experts_with_no_moe_layer_are_a_dense_model(dense_by):
    moe = {**_TINY, "num_local_experts": 8, "num_experts_per_tok": 2, **dense_by}
    m, dense = ModelSpec.from_hf_config(moe), ModelSpec.from_hf_config(_TINY)
    assert (m.n_experts, m.n_experts_per_token, m.n_moe_layers, m.is_moe) == (1, 1, 0, False)
    assert m.n_params == m.n_active_params == dense.n_params
    # One MoE layer left: a mixture of experts whose counts agree with each other.
    one = ModelSpec.from_hf_config({**moe, "first_k_dense_replace": 3, "mlp_only_layers": []})
    assert one.n_moe_layers == 1 and one.n_params - one.n_active_params == 6 * 3 * 256 * 512


def test_experts_per_token_at_most_the_experts():
    with pytest.raises(ValueError, match=r"config num_experts_per_tok \(2\) must be <= num_local_experts \(1\)"):
        ModelSpec.from_hf_config({**_TINY, "num_local_experts": 1, "num_experts_per_tok": 2})
    with pytest.raises(ValueError, match=r"num_experts_per_tok \(9\) must be <= num_local_experts \(8\)"):
        ModelSpec.from_hf_config({**_TINY, "num_local_experts": 8, "num_experts_per_tok": 9})
    with pytest.raises(ValueError, match=r"experts_per_token \(2\) must be <= the number of experts \(1: none"):
        ModelSpec.from_hf_config({**_TINY, "experts_per_token": 2})
    # Qwen's dense spelling, experts off, stays dense.
    assert not ModelSpec.from_hf_config({**_TINY, "num_experts": 0}).is_moe


@pytest.mark.parametrize("only", [[4], [-1], ["0"], [True], "0"])
def test_mlp_only_layers_must_be_layer_indices(only):
    with pytest.raises(ValueError, match=r"config mlp_only_layers must be a list of layer indices in \[0, 4\)"):
        ModelSpec.from_hf_config({**_TINY, "num_experts": 8, "num_experts_per_tok": 2, "mlp_only_layers": only})


def test_model_spec_name_and_dense_moe_layers():
    fields = dict(n_layers=2, n_heads=8, n_kv_heads=8, head_dim=32, hidden_size=256, intermediate_size=512,
                  vocab_size=1000, n_params=10**6, n_active_params=10**6)
    for name in (None, "", 3):
        with pytest.raises(TypeError, match="name must be a non-empty string"):
            ModelSpec(name, **fields)
    with pytest.raises(TypeError, match="source must be a string"):
        ModelSpec("x", **fields, source=None)
    # A dense model's MoE layers were silently set to 0.
    with pytest.raises(ValueError, match=r"n_moe_layers must be 0 for a dense model \(n_experts 1\), got 1"):
        ModelSpec("x", **fields, n_moe_layers=1)
    assert ModelSpec("x", **fields, n_experts=4, n_experts_per_token=2).n_moe_layers == 2
