"""Reading a Hugging Face ``config.json`` into the numbers serving arithmetic needs.

:func:`parse_hf_config` returns the keyword arguments of :class:`servelib.models.ModelSpec`:
the layer-by-layer attention (full, sliding window, MLA latent, fixed-size state), the MLP
(dense or a mixture of experts with routed and shared experts, dense-first or interleaved
layers) and the parameter count, total and active per token, counted from the shapes.

Families read (their key spellings and the defaults their transformers classes apply when
a key is absent): Llama, Mistral/Mixtral (``sliding_window``), Qwen2/2.5/3 dense and MoE
(``moe_intermediate_size``, ``shared_expert_intermediate_size``, ``decoder_sparse_step``,
``mlp_only_layers``, ``use_sliding_window``), Qwen3-Next (linear-attention layers with a
fixed state, ``full_attention_interval``), DeepSeek-V2/V3 (MLA: ``kv_lora_rank``,
``qk_rope_head_dim``; ``n_routed_experts``, ``n_shared_experts``, ``first_k_dense_replace``,
``moe_layer_freq``), Gemma-2/3 (local/global layers, GeGLU, tied embeddings, four norms
per layer), Phi-3/4, Falcon (``multi_query``, ``new_decoder_architecture`` with
``num_kv_heads``), ChatGLM/GLM-4 (``multi_query_group_num``, ``kv_channels``,
``ffn_hidden_size``, ``padded_vocab_size``), gpt-oss (``layer_types``, ``sliding_window``,
MoE) and multimodal configs that nest the language model under ``text_config``.

A key that changes the cache or the parameter count and that this module does not model
raises ValueError naming it; an absent key whose default matters (tied embeddings in a
config without ``model_type``) warns. Never a quiet number.
"""
from __future__ import annotations

import json
import os
import warnings

from . import _check

#: ``tie_word_embeddings`` default of each family's transformers config class, used when
#: the key is absent (``PretrainedConfig`` itself defaults to True; many classes override).
TIED_DEFAULT = {
    "llama": False, "mistral": False, "mixtral": False, "qwen2": False, "qwen2_moe": False,
    "qwen3": False, "qwen3_moe": False, "qwen3_next": False, "phi3": False, "deepseek_v2": False,
    "deepseek_v3": False, "gpt_oss": False, "glm": False, "glm4": False, "chatglm": False,
    "gemma": True, "gemma2": True, "gemma3_text": True, "falcon": True,
}

#: Families whose MLP is gated (three matrices: gate, up, down) whatever the activation's name.
GATED = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next",
         "phi3", "deepseek_v2", "deepseek_v3", "gpt_oss", "glm", "glm4", "chatglm", "gemma",
         "gemma2", "gemma3_text"}
#: Families whose MLP has two matrices (up, down).
UNGATED = {"falcon", "gpt2", "gpt_neox", "gptj", "phi", "opt", "bloom", "gpt_bigcode", "starcoder2"}
#: Activation names that mean a gated MLP when the family is not known.
_GATED_ACTS = {"silu", "swiglu", "swish", "geglu"}

#: Defaults of keys that some published configs leave out, by family (transformers config
#: class defaults): Gemma-3's text config omits its vocabulary and its local/global pattern.
FAMILY_DEFAULTS = {
    "gemma3_text": {"vocab_size": 262_208, "sliding_window_pattern": 6},
}

#: Families with four norms per layer (before and after attention and MLP), not two.
_FOUR_NORMS = {"gemma2", "gemma3_text"}

#: Keys that change the cache or the parameter count in ways not modelled here.
UNSUPPORTED_KEYS = {
    "attention_chunk_size": "chunked local attention (Llama-4)",
    "index_topk": "a sparse-attention indexer with its own cache (DeepSeek-V3.2)",
    "hybrid_override_pattern": "Mamba-2 hybrid layer pattern (Nemotron-H)",
    "mamba_d_state": "Mamba layers (Jamba)",
    "attn_layer_period": "Mamba/attention interleaving (Jamba)",
    "linear_attn_config": "linear-attention layers (Kimi-Linear)",
    "block_types": "recurrent blocks (RecurrentGemma)",
    "num_local_experts_per_layer": "per-layer expert counts",
    "kv_lora_rank_per_layer": "per-layer latent sizes",
}

#: ``layer_types`` entries understood, and the attention kind each maps to.
LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding", "linear_attention": "state"}


def load_config(cfg) -> dict:
    """``cfg`` as a dict: a dict itself, a path to a ``config.json``, or JSON text.

    Multimodal configs are descended into: the language model's fields under
    ``text_config`` (Gemma-3, Llava, Qwen-VL) are merged over the top level.
    Raises TypeError for anything else and ValueError for malformed JSON.
    """
    if isinstance(cfg, os.PathLike) or (isinstance(cfg, str) and not cfg.lstrip().startswith("{")):
        with open(cfg) as fh:
            cfg = json.load(fh)
    elif isinstance(cfg, str):
        try:
            cfg = json.loads(cfg)
        except json.JSONDecodeError as e:
            raise ValueError(f"config is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    if not isinstance(cfg, dict):
        raise TypeError(f"cfg must be a config.json dict, a path or JSON text, got {type(cfg).__name__}")
    text = cfg.get("text_config")
    if isinstance(text, dict):
        # The language model's own keys win; the wrapper's (name, source, tie flag) fill gaps.
        cfg = {**{k: v for k, v in cfg.items() if k != "text_config"}, **text}
    return cfg


class _Reader:
    """Typed access to a config dict: every count is checked, naming the config key."""

    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.family = str(cfg.get("model_type", "")).lower()
        self.defaults = FAMILY_DEFAULTS.get(self.family, {})

    def has(self, key) -> bool:
        return self.cfg.get(key) is not None

    def first(self, *keys) -> str:
        """The first of ``keys`` the config sets (to name it in an error)."""
        return next(k for k in keys if self.has(k))

    def flag(self, key, default: bool) -> bool:
        """A boolean key: a JSON ``true``/``false`` only (the string ``"false"`` would read as true)."""
        if not self.has(key):
            return default
        value = self.cfg[key]
        if not isinstance(value, bool):
            raise TypeError(f"config {key} must be a JSON true or false, got {type(value).__name__} {value!r:.40}")
        return value

    def count(self, *keys, default=None, zero_ok=False):
        for k in keys:
            if self.has(k):
                if zero_ok:
                    return _check.non_negative_int(f"config {k}", self.cfg[k])
                return _check.positive_int(f"config {k}", self.cfg[k])
        for k in keys:
            if k in self.defaults:
                return self.defaults[k]
        if default is None:
            raise KeyError(f"config has none of {keys}")
        return default


def _check_supported(cfg: dict):
    for key, what in UNSUPPORTED_KEYS.items():
        if cfg.get(key) not in (None, False, 0, []):
            raise ValueError(f"config key {key!r} ({what}) changes the cache or the parameter count "
                             "and is not modelled by servelib")


def _tied(r: _Reader) -> bool:
    if r.has("tie_word_embeddings"):
        return r.flag("tie_word_embeddings", False)
    if r.family in TIED_DEFAULT:
        return TIED_DEFAULT[r.family]
    # No family to ask: count a separate LM head, and say so (transformers' own default is tied).
    warnings.warn("config has no tie_word_embeddings and no known model_type: counted untied (a separate "
                  "LM head); transformers' PretrainedConfig default is tied, so set the key to be sure",
                  UserWarning, stacklevel=4)
    return False


def _gated(r: _Reader) -> bool:
    if r.family in GATED:
        return True
    if r.family in UNGATED:
        return False
    act = str(r.cfg.get("hidden_activation") or r.cfg.get("hidden_act") or r.cfg.get("activation") or "gelu")
    return act.lower() in _GATED_ACTS


def _kv_heads(r: _Reader, n_heads: int) -> int:
    cfg = r.cfg
    if r.flag("new_decoder_architecture", False):
        # Falcon-40B/180B: grouped KV heads; transformers still writes multi_query: true.
        return r.count("num_kv_heads", "num_key_value_heads", "n_head_kv")
    if r.flag("multi_query", False):
        # Falcon-7B, GPT-BigCode: one KV head, whatever num_kv_heads transformers wrote beside it.
        return 1
    if r.has("num_key_value_heads") or r.has("num_kv_heads") or r.has("n_head_kv"):
        return r.count("num_key_value_heads", "num_kv_heads", "n_head_kv")
    if r.has("multi_query_group_num") and r.flag("multi_query_attention", True):
        return r.count("multi_query_group_num")           # ChatGLM / GLM-4
    return n_heads


def _attention_kinds(r: _Reader, n_layers: int) -> list[str]:
    """Per layer: 'full', 'sliding', 'mla' or 'state'."""
    cfg = r.cfg
    if r.has("kv_lora_rank"):
        return ["mla"] * n_layers
    if r.has("layer_types"):
        types = cfg["layer_types"]
        if not isinstance(types, list) or len(types) != n_layers:
            raise ValueError(f"config layer_types must list one entry per layer ({n_layers}), got {types!r:.80}")
        kinds = []
        for i, t in enumerate(types):
            if t not in LAYER_TYPES:
                raise ValueError(f"config layer_types[{i}] = {t!r} is not modelled; known: {', '.join(LAYER_TYPES)}")
            kinds.append(LAYER_TYPES[t])
        return kinds
    if r.has("full_attention_interval"):
        k = r.count("full_attention_interval")
        return ["full" if (i + 1) % k == 0 else "state" for i in range(n_layers)]
    use_window = r.flag("use_sliding_window", None)
    if cfg.get("sliding_window") is None or use_window is False:
        return ["full"] * n_layers
    if use_window:
        # Qwen2: the window applies from layer max_window_layers on.
        first = r.count("max_window_layers", default=0, zero_ok=True)
        return ["sliding" if i >= first else "full" for i in range(n_layers)]
    if r.family == "gemma2":
        return ["sliding" if i % 2 == 0 else "full" for i in range(n_layers)]     # local, global, ...
    if r.has("sliding_window_pattern") or "sliding_window_pattern" in r.defaults:
        p = r.count("sliding_window_pattern")
        return ["full" if (i + 1) % p == 0 else "sliding" for i in range(n_layers)]
    return ["sliding"] * n_layers                                                # Mistral-7B-v0.1, Phi-3


def _moe_layers(r: _Reader, n_layers: int, n_experts: int) -> list[bool]:
    cfg = r.cfg
    if n_experts <= 1:
        return [False] * n_layers
    first = r.count("first_k_dense_replace", default=0, zero_ok=True)
    freq = r.count("moe_layer_freq", default=1)
    step = r.count("decoder_sparse_step", default=1)
    only = cfg.get("mlp_only_layers") or []
    if not isinstance(only, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n_layers for i in only):
        raise ValueError(f"config mlp_only_layers must be a list of layer indices in [0, {n_layers}), "
                         f"got {only!r:.80}")
    return [i >= first and i % freq == 0 and (i + 1) % step == 0 and i not in only for i in range(n_layers)]


def parse_hf_config(cfg) -> dict:
    """Keyword arguments of :class:`servelib.models.ModelSpec` (except ``name``) from a config.

    ``cfg`` is a dict, a path to ``config.json`` or JSON text (see :func:`load_config`).
    Parameters are counted from the shapes: embeddings (and an untied LM head), attention
    projections (Q/K/V/O, MLA's compressions, linear attention's projections), MLPs (dense,
    routed experts, shared experts and their gates), MoE routers and norms. Biases and
    per-head norms are left out (well under 0.1%), and so are multi-token-prediction
    modules (``num_nextn_predict_layers``), which serving loads only for speculative decoding.

    Experts declared with no layer left to hold them (``first_k_dense_replace`` or
    ``mlp_only_layers`` covering every layer) make a dense model, counted as one.

    Raises KeyError naming a missing field; ValueError for inconsistent sizes (``hidden_size``
    not a multiple of ``num_attention_heads`` when ``head_dim`` is absent, more experts per
    token than experts) or for a key that is not modelled (:data:`UNSUPPORTED_KEYS`);
    TypeError for a count of the wrong type or a boolean key (``tie_word_embeddings``,
    ``multi_query``, ``use_sliding_window`` ...) that is not a JSON ``true``/``false``.
    """
    cfg = load_config(cfg)
    _check_supported(cfg)
    r = _Reader(cfg)
    n_layers = r.count("num_hidden_layers", "n_layer", "num_layers")
    hidden = r.count("hidden_size", "n_embd", "d_model")
    n_heads = r.count("num_attention_heads", "n_head")
    n_kv = _kv_heads(r, n_heads)
    if not (r.has("head_dim") or r.has("kv_channels")) and hidden % n_heads:
        # No head size given: it is hidden / heads, which must then be a whole number.
        raise ValueError(f"config {r.first('hidden_size', 'n_embd', 'd_model')} ({hidden}) must be a multiple "
                         f"of {r.first('num_attention_heads', 'n_head')} ({n_heads}) when head_dim is absent")
    head_dim = r.count("head_dim", "kv_channels", default=hidden // n_heads)
    intermediate = r.count("intermediate_size", "ffn_hidden_size", default=4 * hidden)
    vocab = r.count("vocab_size", "padded_vocab_size")
    if r.has("padded_vocab_size"):
        vocab = r.count("padded_vocab_size")          # GLM's embedding is the padded size
    # Qwen writes num_experts: 0 for its dense models; any other zero count is an error.
    experts_off = cfg.get("num_experts") == 0 and not r.has("num_local_experts")
    n_experts = 1 if experts_off else r.count("num_local_experts", "num_experts", "n_routed_experts", default=1)
    tok_keys = ("num_experts_per_tok", "num_experts_per_token", "experts_per_token")
    per_tok = r.count(*tok_keys) if n_experts > 1 else 1
    if not experts_off and any(r.has(k) for k in tok_keys) and r.count(*tok_keys) > n_experts:
        keys = ("num_local_experts", "num_experts", "n_routed_experts")
        experts = (f"{r.first(*keys)} ({n_experts})" if any(r.has(k) for k in keys)
                   else f"the number of experts (1: none of {', '.join(keys)} is set)")
        raise ValueError(f"config {r.first(*tok_keys)} ({r.count(*tok_keys)}) must be <= {experts}: "
                         "a token cannot use more experts than there are")
    gated = _gated(r)
    tied = _tied(r)
    mats = 3 if gated else 2

    kinds = _attention_kinds(r, n_layers)
    window = r.count("sliding_window") if "sliding" in kinds else None
    moe = _moe_layers(r, n_layers, n_experts)
    if not any(moe):
        # Experts declared but every layer dense (first_k_dense_replace, mlp_only_layers): a dense model.
        n_experts = per_tok = 1

    # Attention parameters and the per-layer cache description, by kind.
    gate_q = 2 if (r.family == "qwen3_next" or r.flag("attn_output_gate", False)) else 1
    gqa_attn = hidden * head_dim * ((1 + gate_q) * n_heads + 2 * n_kv)   # Q (and its gate), O, K, V
    layer_specs, attn_params = [], []
    for kind in kinds:
        if kind == "mla":
            rope, nope = r.count("qk_rope_head_dim"), r.count("qk_nope_head_dim")
            v_dim, lora = r.count("v_head_dim"), r.count("kv_lora_rank")
            q = (hidden * r.count("q_lora_rank") + r.count("q_lora_rank") * n_heads * (nope + rope)
                 if r.has("q_lora_rank") else hidden * n_heads * (nope + rope))
            p = q + hidden * (lora + rope) + lora + lora * n_heads * (nope + v_dim) + n_heads * v_dim * hidden
            layer_specs.append({"kind": "mla", "latent_dim": lora + rope})
        elif kind == "state":
            nk, nv = r.count("linear_num_key_heads"), r.count("linear_num_value_heads")
            dk, dv = r.count("linear_key_head_dim"), r.count("linear_value_head_dim")
            conv = r.count("linear_conv_kernel_dim")
            conv_dim = 2 * nk * dk + nv * dv
            # in_proj_qkvz, in_proj_ba, depthwise conv, out_proj (Qwen3-Next gated DeltaNet).
            p = hidden * (2 * nk * dk + 2 * nv * dv) + hidden * 2 * nv + conv_dim * conv + nv * dv * hidden
            layer_specs.append({"kind": "state", "state_elems": conv_dim * (conv - 1) + nv * dk * dv,
                                "state_heads": nv})
        else:
            p = gqa_attn
            layer_specs.append({"kind": kind, "window": window} if kind == "sliding" else {"kind": "full"})
        attn_params.append(p)

    # MLP parameters per layer: dense, or routed experts + router + shared experts.
    expert_inter = r.count("moe_intermediate_size", default=intermediate)
    expert = mats * hidden * expert_inter
    shared = 0
    if r.has("n_shared_experts"):
        shared = r.count("n_shared_experts", zero_ok=True) * expert
    if r.has("shared_expert_intermediate_size"):
        shared = mats * hidden * r.count("shared_expert_intermediate_size") + hidden   # + its sigmoid gate
    dense_mlp = mats * hidden * intermediate
    norms = (4 if r.family in _FOUR_NORMS else 2) * hidden
    total = active = 0
    for i in range(n_layers):
        base = attn_params[i] + norms
        if moe[i]:
            router = hidden * n_experts
            total += base + n_experts * expert + router + shared
            active += base + per_tok * expert + router + shared
        else:
            total += base + dense_mlp
            active += base + dense_mlp
    embed = vocab * hidden * (1 if tied else 2) + hidden                   # + the final norm
    uniform = all(s == {"kind": "full"} for s in layer_specs)
    return dict(
        n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv, head_dim=head_dim, hidden_size=hidden,
        intermediate_size=expert_inter if n_experts > 1 else intermediate, vocab_size=vocab,
        n_params=total + embed, n_active_params=active + embed, n_experts=n_experts,
        n_experts_per_token=per_tok, n_moe_layers=sum(moe),
        layers=() if uniform else tuple(layer_specs))
