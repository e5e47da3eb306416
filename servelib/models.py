"""Transformer architectures, layer by layer, read from Hugging Face ``config.json`` files.

A :class:`ModelSpec` holds what serving arithmetic needs: layers, attention and KV heads,
head size, hidden and MLP sizes, vocabulary, the parameter count (total and, for a mixture
of experts, active per token), and, where the layers do not all cache alike, a
:class:`LayerSpec` per layer (full attention, a sliding window of W tokens, an MLA latent,
or a fixed-size recurrent state). Presets are built from the fields of each model's
published ``config.json`` (the source is recorded on the spec), so the same code path reads
a preset and a file the reader downloads (:mod:`servelib.hf_config`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from . import _check
from .hf_config import parse_hf_config, load_config

#: Kinds of attention layer, by what each keeps per sequence.
LAYER_KINDS = ("full", "sliding", "mla", "state")


@dataclass(frozen=True)
class LayerSpec:
    """What one layer keeps in the cache for a sequence.

    ``kind``: ``"full"`` (K and V of every token, ``n_kv_heads`` heads of ``head_dim``),
    ``"sliding"`` (the same, for the last ``window`` tokens only), ``"mla"`` (one latent
    vector of ``latent_dim`` elements per token, shared by all heads: DeepSeek's
    ``kv_lora_rank + qk_rope_head_dim``) or ``"state"`` (``state_elems`` elements per
    sequence whatever its length: a linear-attention or Mamba layer's recurrent and
    convolution state, split over ``state_heads`` heads).
    Raises ValueError for an unknown kind or a missing size.
    """

    kind: str
    window: int | None = None
    latent_dim: int = 0
    state_elems: int = 0
    state_heads: int = 1

    def __post_init__(self):
        _check.choice("kind", self.kind, LAYER_KINDS)
        need = {"sliding": "window", "mla": "latent_dim", "state": "state_elems"}.get(self.kind)
        if need:
            object.__setattr__(self, need, _check.positive_int(need, getattr(self, need)))
        object.__setattr__(self, "state_heads", _check.positive_int("state_heads", self.state_heads))


_FULL = LayerSpec("full")


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer, as far as serving arithmetic needs it.

    Fields (all counts are plain integers):
      ``n_layers`` (L), ``n_heads`` (query/attention heads), ``n_kv_heads`` (H_kv: equal to
      ``n_heads`` for MHA, 1 for MQA, in between for GQA), ``head_dim`` (d, per head),
      ``hidden_size``, ``intermediate_size`` (per routed expert for MoE), ``vocab_size``,
      ``n_params`` (all weights, every expert included: what must sit in memory),
      ``n_active_params`` (weights used per token: equal to ``n_params`` for dense models;
      shared experts and dense layers included), ``n_experts`` and ``n_experts_per_token``
      (1 for dense models), ``n_moe_layers`` (layers whose MLP is a mixture of experts;
      0 means all of them when ``n_experts > 1``), ``layers`` (one :class:`LayerSpec` per
      layer, or empty when every layer is full attention with ``n_kv_heads`` heads: the
      layers' KV heads are always the model's ``n_kv_heads``), ``source``.

    Raises ValueError on construction if a count is not a positive integer, if
    ``n_heads % n_kv_heads != 0`` (every KV head must serve the same number of query heads),
    if a dense model has MoE layers, or if ``layers`` does not hold one entry per layer;
    TypeError if ``name`` is not a non-empty string.
    """

    name: str
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    hidden_size: int
    intermediate_size: int
    vocab_size: int
    n_params: int
    n_active_params: int
    n_experts: int = 1
    n_experts_per_token: int = 1
    source: str = ""
    n_moe_layers: int = 0
    layers: tuple = ()

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise TypeError(f"name must be a non-empty string, got {type(self.name).__name__} {self.name!r}")
        _check.instance("source", self.source, str, "a string")
        for f in ("n_layers", "n_heads", "n_kv_heads", "head_dim", "hidden_size",
                  "intermediate_size", "vocab_size", "n_params", "n_active_params",
                  "n_experts", "n_experts_per_token"):
            object.__setattr__(self, f, _check.positive_int(f, getattr(self, f)))
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads}): "
                "each KV head serves a whole group of query heads")
        if self.n_experts_per_token > self.n_experts:
            raise ValueError(f"n_experts_per_token ({self.n_experts_per_token}) must be <= "
                             f"n_experts ({self.n_experts})")
        if self.n_active_params > self.n_params:
            raise ValueError(f"n_active_params ({self.n_active_params}) must be <= "
                             f"n_params ({self.n_params})")
        moe = _check.non_negative_int("n_moe_layers", self.n_moe_layers)
        if self.n_experts == 1 and moe:
            raise ValueError(f"n_moe_layers must be 0 for a dense model (n_experts 1), got {moe}")
        if self.n_experts > 1 and moe == 0:
            moe = self.n_layers
        if moe > self.n_layers:
            raise ValueError(f"n_moe_layers ({moe}) must be <= n_layers ({self.n_layers})")
        object.__setattr__(self, "n_moe_layers", moe)
        layers = tuple(LayerSpec(**x) if isinstance(x, dict) else _check.instance("layers[i]", x, LayerSpec)
                       for x in _check.instance("layers", self.layers, (tuple, list), "a tuple of LayerSpec"))
        if layers and len(layers) != self.n_layers:
            raise ValueError(f"layers must hold one LayerSpec per layer ({self.n_layers}), got {len(layers)}")
        if all(x == _FULL for x in layers):
            layers = ()               # uniform full attention is the default, spelled one way
        object.__setattr__(self, "layers", layers)

    @property
    def layer_specs(self) -> tuple:
        """One :class:`LayerSpec` per layer (all full attention when ``layers`` is empty)."""
        return self.layers or (_FULL,) * self.n_layers

    def count_layers(self, kind: str) -> int:
        """Number of layers of ``kind`` (one of :data:`LAYER_KINDS`)."""
        _check.choice("kind", kind, LAYER_KINDS)
        return sum(x.kind == kind for x in self.layer_specs)

    @property
    def layer_mix(self) -> str:
        """The layers in words, e.g. ``"24 full"``, ``"12 full + 12 sliding (128)"``, ``"61 MLA"``."""
        parts = []
        for kind, label in (("full", "full"), ("sliding", "sliding"), ("mla", "MLA"), ("state", "state")):
            n = self.count_layers(kind)
            if n:
                windows = sorted({x.window for x in self.layer_specs if x.kind == "sliding"})
                extra = f" ({', '.join(map(str, windows))})" if kind == "sliding" else ""
                parts.append(f"{n} {label}{extra}")
        return " + ".join(parts)

    @property
    def attention(self) -> str:
        """'MLA' for a latent cache; else 'MHA', 'MQA' or 'GQA' from attention vs KV heads."""
        if self.count_layers("mla"):
            return "MLA"
        if self.n_kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else "GQA"

    @property
    def group_size(self) -> int:
        """Query heads that share one KV head (``n_heads // n_kv_heads``)."""
        return self.n_heads // self.n_kv_heads

    @property
    def is_moe(self) -> bool:
        """True for a mixture of experts (``n_experts > 1``)."""
        return self.n_experts > 1

    @property
    def expert_params(self) -> float:
        """Parameters of one routed expert in one layer (0 for a dense model).

        Derived from the counts: ``(n_params - n_active_params) /
        (n_moe_layers * (n_experts - n_experts_per_token))``, since the experts a token does
        not use are exactly what separates the two counts.
        """
        idle = self.n_experts - self.n_experts_per_token
        if not self.is_moe or idle == 0:
            return 0.0
        return (self.n_params - self.n_active_params) / (self.n_moe_layers * idle)

    def with_kv_heads(self, n_kv_heads: int) -> "ModelSpec":
        """The same model with ``n_kv_heads`` KV heads (e.g. its MHA or MQA variant).

        Parameter counts are recomputed for the K and V projections of the attention
        layers (full and sliding). Raises ValueError if ``n_kv_heads`` does not divide
        ``n_heads``, or for an MLA model (its cache has no KV heads to change).
        """
        n_kv_heads = _check.positive_int("n_kv_heads", n_kv_heads)
        if self.count_layers("mla"):
            raise ValueError(f"{self.name} caches an MLA latent: it has no KV heads to change")
        attn_layers = self.count_layers("full") + self.count_layers("sliding")
        delta = 2 * attn_layers * self.hidden_size * self.head_dim * (n_kv_heads - self.n_kv_heads)
        suffix = {self.n_heads: "MHA", 1: "MQA"}.get(n_kv_heads, f"{n_kv_heads} KV heads")
        return dataclasses.replace(
            self, name=f"{self.name} ({suffix})", n_kv_heads=n_kv_heads,
            n_params=self.n_params + delta, n_active_params=self.n_active_params + delta,
            source=f"{self.source}; KV heads changed to {n_kv_heads}")
    def scaled(self, *, n_layers=None, hidden_size=None, n_heads=None, n_kv_heads=None,
               intermediate_size=None, vocab_size=None, name=None) -> "ModelSpec":
        """A smaller (or larger) dense model of the same shape family, parameters recounted.

        ``head_dim`` becomes ``hidden_size // n_heads``. Used to build toy models that a CPU
        can time. Raises ValueError if the new sizes are inconsistent.
        """
        cfg = {
            # ``is None``, not ``or``: an explicit 0 must be rejected, not replaced by the original.
            "num_hidden_layers": self.n_layers if n_layers is None else _check.positive_int("n_layers", n_layers),
            "hidden_size": self.hidden_size if hidden_size is None else _check.positive_int("hidden_size", hidden_size),
            "num_attention_heads": self.n_heads if n_heads is None else _check.positive_int("n_heads", n_heads),
            "num_key_value_heads": self.n_kv_heads if n_kv_heads is None else _check.positive_int("n_kv_heads", n_kv_heads),
            "intermediate_size": (self.intermediate_size if intermediate_size is None
                                  else _check.positive_int("intermediate_size", intermediate_size)),
            "vocab_size": self.vocab_size if vocab_size is None else _check.positive_int("vocab_size", vocab_size),
            "hidden_act": "silu", "tie_word_embeddings": False,
        }
        if cfg["hidden_size"] % cfg["num_attention_heads"]:
            raise ValueError(f"hidden_size ({cfg['hidden_size']}) must be a multiple of "
                             f"n_heads ({cfg['num_attention_heads']})")
        return ModelSpec.from_hf_config(cfg, name=name or f"{self.name} (scaled)")

    @classmethod
    def from_hf_config(cls, cfg, name: str | None = None) -> "ModelSpec":
        """Build a spec from a Hugging Face ``config.json``: a dict, a path to the file, or its text.

        Reads each family's key spellings and defaults (:mod:`servelib.hf_config` lists
        them): ``head_dim``/``kv_channels`` when present (it is not always
        ``hidden_size // num_attention_heads``), KV heads from ``num_key_value_heads``,
        ``num_kv_heads``, ``multi_query_group_num`` or ``multi_query``; experts from
        ``num_local_experts``/``num_experts``/``n_routed_experts`` with their own width
        ``moe_intermediate_size``, shared experts, dense-first or interleaved MoE layers;
        sliding-window, MLA and linear-attention layers; ``text_config`` of multimodal
        configs. Parameters are counted from the shapes (biases ignored, well under 0.1%).

        Raises KeyError naming a missing field, ValueError for inconsistent sizes or a key
        that changes the cache or the parameter count and is not modelled, TypeError for a
        field of the wrong type. Warns when tied embeddings had to be assumed.
        """
        fields = parse_hf_config(cfg)
        raw = load_config(cfg)
        src = raw.get("_source") or "config.json"
        if name is None:
            name = next((v for v in (raw.get("_name_or_path"), raw.get("model_type"))
                         if isinstance(v, str) and v.strip()), "model")
        return cls(name=name, source=src, **fields)


def _hf(repo: str, checked: str) -> str:
    """Where a preset's config.json is published, and the published copy its fields were
    checked against (a pinned file in a public repository, or a page that shows the file)."""
    return f"https://huggingface.co/{repo}/blob/main/config.json; fields checked against {checked}"


# Copies of published configs the presets were checked against, pinned to a commit.
_MLC = ("https://github.com/mlc-ai/mlc-llm/blob/79d603f085f50500e9509fa01785ffa7ecfaaa93/"
        "python/mlc_llm/model/model_preset.py")
_MAXTEXT = ("https://github.com/AI-Hypercomputer/maxtext/blob/e591f30cbbf217ed67ef71263ec0538239f9c3b8/"
            "src/maxtext/configs/models/")
_LLAMA_SKUS = ("https://github.com/meta-llama/llama-models/blob/8c88b8c0d75dbd136b6895220c4f56ccbe2f2d24/"
               "models/sku_list.py")
_DEEPSEEK = ("https://github.com/deepseek-ai/DeepSeek-V3/blob/9b4e9788e4a3a731f7567338ed15d3ec549ce03b/"
             "inference/configs/")
_GPT_OSS = ("https://github.com/openai/gpt-oss/blob/0568dfc94f09469e2968c2b90e50561d1b3fc424/"
            "gpt_oss/torch/model.py (sliding window on even layers, layer 0 first)")

_FALCON_7B_COPY = ("https://huggingface.co/tiiuae/falcon-7b-instruct/blob/refs%2Fpr%2F126/config.json "
                   "(the instruct model's file after the move to transformers: same architecture) and "
                   "https://huggingface.co/justinpinkney/falcon-7b/blob/main/config.json (a duplicate of "
                   "the original file: n_layer 32, n_head 71, multi_query)")
_MISTRAL_V01_COPY = (f"{_MLC} (mistral_7b, window as sliding_window_size) and https://huggingface.co/"
                     "Capstone-lpx/mistral7b_instruct/blob/eef8e19a73c12a7506c5386df9b985e7b20f324a/config.json "
                     "(a duplicate of Mistral-7B-Instruct-v0.1)")
_LLAMA_405B_COPY = (f"{_LLAMA_SKUS} (Llama 3.1 405B: ffn_dim_multiplier 1.2, multiple_of 4096 give 53248) "
                    f"and {_MAXTEXT}llama3.1-405b.yml")
_QWEN2_57B_COPY = ("https://huggingface.co/Qwen/Qwen2-57B-A14B/blame/759c0d83a2b7ad416611d984fdfffbec8de361c2/"
                   "config.json")
_QWEN3_NEXT_COPY = (f"{_MAXTEXT}qwen3-next-80b-a3b.yml (intermediate_size is not read: every layer is a "
                    "mixture of experts)")
_GEMMA3_COPY = (f"{_MAXTEXT}gemma3-27b.yml and the Gemma3TextConfig defaults in https://github.com/huggingface/"
                "transformers/blob/008f5c8c29be84d4721dc6d1e0fcd72300580be4/src/transformers/models/gemma3/"
                "configuration_gemma3.py")
_PHI3_COPY = ("https://github.com/mlc-ai/mlc-llm/blob/b499d2b3ea91c5260ccc47fd6b07d5792f8dd8e0/"
              "python/mlc_llm/model/model_preset.py (phi-3)")
_PHI4_COPY = ("https://huggingface.co/lserinol/levent_medical_llm_full/blame/main/config.json "
              "(a fine-tune's copy of the file)")
_GLM4_COPY = ("https://huggingface.co/THUDM/glm-4-9b-chat/blame/731ca7fd937cff9f2ae5f01de85a0c8bf21df6fa/"
              "config.json (the chat model: same architecture)")

# The fields of each model's published config.json that the parameter count and the KV
# cache depend on (other fields omitted). ``_source`` records where the file is published
# and the copy its fields were checked against.
_CONFIGS = {
    "llama-2-70b": {"_source": _hf("meta-llama/Llama-2-70b-hf",
                                  f"{_MLC} (llama2_70b)"),
                    "model_type": "llama", "num_hidden_layers": 80,
                    "hidden_size": 8192, "num_attention_heads": 64, "num_key_value_heads": 8,
                    "intermediate_size": 28672, "vocab_size": 32000, "hidden_act": "silu",
                    "tie_word_embeddings": False},
    "llama-3-70b": {"_source": _hf("meta-llama/Meta-Llama-3-70B",
                                  f"{_LLAMA_SKUS} (Llama 3 70B) and {_MAXTEXT}llama3-70b.yml"),
                    "model_type": "llama", "num_hidden_layers": 80,
                    "hidden_size": 8192, "num_attention_heads": 64, "num_key_value_heads": 8,
                    "intermediate_size": 28672, "vocab_size": 128256, "hidden_act": "silu",
                    "tie_word_embeddings": False},
    "llama-3-8b": {"_source": _hf("meta-llama/Meta-Llama-3-8B",
                                 f"{_LLAMA_SKUS} (Llama 3 8B) and {_MAXTEXT}llama3-8b.yml"),
                   "model_type": "llama", "num_hidden_layers": 32,
                   "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
                   "intermediate_size": 14336, "vocab_size": 128256, "hidden_act": "silu",
                    "tie_word_embeddings": False},
    "llama-2-7b": {"_source": _hf("meta-llama/Llama-2-7b-hf",
                                 f"{_MLC} (llama2_7b)"),
                   "model_type": "llama", "num_hidden_layers": 32,
                   "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 32,
                   "intermediate_size": 11008, "vocab_size": 32000, "hidden_act": "silu",
                    "tie_word_embeddings": False},
    # v0.3: no sliding window (v0.1's 4,096-token window is the "mistral-7b-v0.1" preset).
    "mistral-7b": {"_source": _hf("mistralai/Mistral-7B-v0.3",
                                 f"{_MLC} (mistral_7b_v03)"),
                   "model_type": "mistral",
                   "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                   "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32768,
                   "hidden_act": "silu", "sliding_window": None, "tie_word_embeddings": False},
    "mixtral-8x7b": {"_source": _hf("mistralai/Mixtral-8x7B-v0.1",
                                   f"{_MLC} (Mixtral-8x7B-v0.1)"),
                     "model_type": "mixtral", "num_hidden_layers": 32,
                     "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
                     "intermediate_size": 14336, "vocab_size": 32000, "hidden_act": "silu",
                     "num_local_experts": 8, "num_experts_per_tok": 2, "sliding_window": None,
                     "tie_word_embeddings": False},
    "qwen2.5-7b": {"_source": _hf("Qwen/Qwen2.5-7B",
                                 f"{_MAXTEXT}qwen2.5-7b.yml"),
                   "model_type": "qwen2", "num_hidden_layers": 28,
                   "hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4,
                   "intermediate_size": 18944, "vocab_size": 152064, "hidden_act": "silu",
                   "tie_word_embeddings": False},
    "falcon-7b": {"_source": _hf("tiiuae/falcon-7b",
                                _FALCON_7B_COPY),
                  "model_type": "falcon",
                  "num_hidden_layers": 32, "hidden_size": 4544, "num_attention_heads": 71,
                  "multi_query": True, "new_decoder_architecture": False, "parallel_attn": True,
                  "vocab_size": 65024},
    # Mixed layers, mixtures of experts and the other families of today.
    "mistral-7b-v0.1": {"_source": _hf("mistralai/Mistral-7B-v0.1",
                                      _MISTRAL_V01_COPY),
                        "model_type": "mistral", "hidden_act": "silu",
                        "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                        "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000,
                        "sliding_window": 4096, "tie_word_embeddings": False},
    "llama-3.2-1b": {"_source": _hf("meta-llama/Llama-3.2-1B",
                                   f"{_MLC} (llama3_2_1b) and {_LLAMA_SKUS} (Llama 3.2 1B)"),
                     "model_type": "llama", "hidden_act": "silu",
                     "num_hidden_layers": 16, "hidden_size": 2048, "num_attention_heads": 32,
                     "num_key_value_heads": 8, "head_dim": 64, "intermediate_size": 8192,
                     "vocab_size": 128256, "tie_word_embeddings": True},
    "llama-3.1-405b": {"_source": _hf("meta-llama/Llama-3.1-405B",
                                     _LLAMA_405B_COPY),
                       "model_type": "llama", "hidden_act": "silu",
                       "num_hidden_layers": 126, "hidden_size": 16384, "num_attention_heads": 128,
                       "num_key_value_heads": 8, "intermediate_size": 53248, "vocab_size": 128256,
                       "tie_word_embeddings": False},
    "qwen3-8b": {"_source": _hf("Qwen/Qwen3-8B",
                               f"{_MAXTEXT}qwen3-8b.yml"),
                 "model_type": "qwen3", "hidden_act": "silu", "num_hidden_layers": 36,
                 "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
                 "head_dim": 128, "intermediate_size": 12288, "vocab_size": 151936,
                 "use_sliding_window": False, "sliding_window": None, "tie_word_embeddings": False},
    "qwen3-30b-a3b": {"_source": _hf("Qwen/Qwen3-30B-A3B",
                                    f"{_MAXTEXT}qwen3-30b-a3b.yml"),
                      "model_type": "qwen3_moe", "hidden_act": "silu",
                      "num_hidden_layers": 48, "hidden_size": 2048, "num_attention_heads": 32,
                      "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 6144,
                      "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8,
                      "decoder_sparse_step": 1, "mlp_only_layers": [], "vocab_size": 151936,
                      "use_sliding_window": False, "sliding_window": None, "tie_word_embeddings": False},
    "qwen3-235b-a22b": {"_source": _hf("Qwen/Qwen3-235B-A22B",
                                      f"{_MAXTEXT}qwen3-235b-a22b.yml"),
                        "model_type": "qwen3_moe", "hidden_act": "silu",
                        "num_hidden_layers": 94, "hidden_size": 4096, "num_attention_heads": 64,
                        "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 12288,
                        "moe_intermediate_size": 1536, "num_experts": 128, "num_experts_per_tok": 8,
                        "decoder_sparse_step": 1, "mlp_only_layers": [], "vocab_size": 151936,
                        "use_sliding_window": False, "sliding_window": None,
                        "tie_word_embeddings": False},
    "qwen2-57b-a14b": {"_source": _hf("Qwen/Qwen2-57B-A14B",
                                     _QWEN2_57B_COPY),
                       "model_type": "qwen2_moe", "hidden_act": "silu",
                       "num_hidden_layers": 28, "hidden_size": 3584, "num_attention_heads": 28,
                       "num_key_value_heads": 4, "intermediate_size": 18944,
                       "moe_intermediate_size": 2560, "shared_expert_intermediate_size": 20480,
                       "num_experts": 64, "num_experts_per_tok": 8, "decoder_sparse_step": 1,
                       "vocab_size": 151936, "use_sliding_window": False, "sliding_window": 4096,
                       "tie_word_embeddings": False},
    "qwen3-next-80b-a3b": {"_source": _hf("Qwen/Qwen3-Next-80B-A3B-Instruct",
                                         _QWEN3_NEXT_COPY),
                           "model_type": "qwen3_next", "hidden_act": "silu",
                           "num_hidden_layers": 48, "hidden_size": 2048, "num_attention_heads": 16,
                           "num_key_value_heads": 2, "head_dim": 256, "intermediate_size": 5120,
                           "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
                           "num_experts": 512, "num_experts_per_tok": 10, "decoder_sparse_step": 1,
                           "mlp_only_layers": [], "full_attention_interval": 4,
                           "linear_num_key_heads": 16, "linear_num_value_heads": 32,
                           "linear_key_head_dim": 128, "linear_value_head_dim": 128,
                           "linear_conv_kernel_dim": 4, "vocab_size": 151936,
                           "tie_word_embeddings": False},
    "deepseek-v2-lite": {"_source": _hf("deepseek-ai/DeepSeek-V2-Lite",
                                       f"{_DEEPSEEK}config_16B.json and {_MLC} (deepseek_v2_lite)"),
                         "model_type": "deepseek_v2", "hidden_act": "silu",
                         "num_hidden_layers": 27, "hidden_size": 2048, "num_attention_heads": 16,
                         "num_key_value_heads": 16, "intermediate_size": 10944,
                         "moe_intermediate_size": 1408, "n_routed_experts": 64, "n_shared_experts": 2,
                         "num_experts_per_tok": 6, "first_k_dense_replace": 1, "moe_layer_freq": 1,
                         "kv_lora_rank": 512, "q_lora_rank": None, "qk_nope_head_dim": 128,
                         "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 102400,
                         "tie_word_embeddings": False},
    "deepseek-v3": {"_source": _hf("deepseek-ai/DeepSeek-V3",
                                  f"{_DEEPSEEK}config_671B.json and {_MAXTEXT}deepseek3-671b.yml"),
                    "model_type": "deepseek_v3", "hidden_act": "silu",
                    "num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 128,
                    "num_key_value_heads": 128, "intermediate_size": 18432, "moe_intermediate_size": 2048,
                    "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
                    "first_k_dense_replace": 3, "moe_layer_freq": 1, "kv_lora_rank": 512,
                    "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                    "v_head_dim": 128, "num_nextn_predict_layers": 1, "vocab_size": 129280,
                    "tie_word_embeddings": False},
    "gemma-2-9b": {"_source": _hf("google/gemma-2-9b",
                                 f"{_MLC} (gemma2_9b) and {_MAXTEXT}gemma2-9b.yml"),
                   "model_type": "gemma2", "num_hidden_layers": 42,
                   "hidden_size": 3584, "num_attention_heads": 16, "num_key_value_heads": 8,
                   "head_dim": 256, "intermediate_size": 14336, "vocab_size": 256000,
                   "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
                   "sliding_window": 4096},
    # Multimodal: the language model's fields sit under text_config, and the published file
    # leaves out the vocabulary and the 5-local:1-global pattern (Gemma3TextConfig defaults).
    "gemma-3-27b": {"_source": _hf("google/gemma-3-27b-it",
                                  _GEMMA3_COPY),
                    "model_type": "gemma3",
                    "text_config": {"model_type": "gemma3_text", "num_hidden_layers": 62,
                                    "hidden_size": 5376, "num_attention_heads": 32,
                                    "num_key_value_heads": 16, "head_dim": 128, "intermediate_size": 21504,
                                    "sliding_window": 1024}},
    "phi-3-mini": {"_source": _hf("microsoft/Phi-3-mini-4k-instruct",
                                 _PHI3_COPY),
                   "model_type": "phi3", "hidden_act": "silu",
                   "num_hidden_layers": 32, "hidden_size": 3072, "num_attention_heads": 32,
                   "num_key_value_heads": 32, "intermediate_size": 8192, "vocab_size": 32064,
                   "sliding_window": 2047, "tie_word_embeddings": False},
    "phi-4": {"_source": _hf("microsoft/phi-4",
                            _PHI4_COPY),
              "model_type": "phi3", "hidden_act": "silu", "num_hidden_layers": 40,
              "hidden_size": 5120, "num_attention_heads": 40, "num_key_value_heads": 10,
              "intermediate_size": 17920, "vocab_size": 100352, "sliding_window": None,
              "tie_word_embeddings": False},
    "glm-4-9b": {"_source": _hf("THUDM/glm-4-9b",
                               _GLM4_COPY),
                 "model_type": "chatglm", "num_layers": 40,
                 "hidden_size": 4096, "num_attention_heads": 32, "multi_query_attention": True,
                 "multi_query_group_num": 2, "kv_channels": 128, "ffn_hidden_size": 13696,
                 "padded_vocab_size": 151552, "tie_word_embeddings": False},
    "gpt-oss-20b": {"_source": _hf("openai/gpt-oss-20b",
                                  f"{_MAXTEXT}gpt-oss-20b.yml and {_GPT_OSS}"),
                    "model_type": "gpt_oss", "hidden_act": "silu", "num_hidden_layers": 24,
                    "hidden_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8,
                    "head_dim": 64, "intermediate_size": 2880, "num_local_experts": 32,
                    "num_experts_per_tok": 4, "vocab_size": 201088, "sliding_window": 128,
                    "layer_types": ["sliding_attention", "full_attention"] * 12,
                    "tie_word_embeddings": False},
    "gpt-oss-120b": {"_source": _hf("openai/gpt-oss-120b",
                                   f"{_GPT_OSS} (its defaults are the 120b) and {_MAXTEXT}gpt-oss-120b.yml"),
                     "model_type": "gpt_oss", "hidden_act": "silu",
                     "num_hidden_layers": 36, "hidden_size": 2880, "num_attention_heads": 64,
                     "num_key_value_heads": 8, "head_dim": 64, "intermediate_size": 2880,
                     "num_local_experts": 128, "num_experts_per_tok": 4, "vocab_size": 201088,
                     "sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"] * 18,
                     "tie_word_embeddings": False},
}


def list_models() -> list[str]:
    """Names of the preset models, sorted."""
    return sorted(_CONFIGS)


def get_model(name: str) -> ModelSpec:
    """The preset :class:`ModelSpec` called ``name`` (case-insensitive).

    Raises TypeError if ``name`` is not a string and KeyError, listing the known names,
    if there is no such preset.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    key = name.strip().lower()
    if key not in _CONFIGS:
        raise KeyError(f"unknown model {name!r}; known models: {', '.join(list_models())}")
    return ModelSpec.from_hf_config(_CONFIGS[key], name=key)
