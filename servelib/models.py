"""Transformer architectures, read from Hugging Face ``config.json`` files.

A :class:`ModelSpec` holds what serving arithmetic needs: layers, attention and KV heads,
head size, hidden and MLP sizes, vocabulary, and the parameter count (total and, for a
mixture of experts, active per token). Presets are built from the fields of each model's
published ``config.json`` (the source is recorded on the spec), so the same code path
reads a preset and a file the reader downloads.
"""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass

from . import _check


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer, as far as serving arithmetic needs it.

    Fields (all counts are plain integers):
      ``n_layers`` (L), ``n_heads`` (query/attention heads), ``n_kv_heads`` (H_kv: equal to
      ``n_heads`` for MHA, 1 for MQA, in between for GQA), ``head_dim`` (d, per head),
      ``hidden_size``, ``intermediate_size`` (per expert for MoE), ``vocab_size``,
      ``n_params`` (all weights, every expert included: what must sit in memory),
      ``n_active_params`` (weights used per token: equal to ``n_params`` for dense models),
      ``n_experts`` and ``n_experts_per_token`` (1 for dense models), ``source`` (where the
      numbers come from).

    Raises ValueError on construction if a count is not a positive integer or if
    ``n_heads % n_kv_heads != 0`` (every KV head must serve the same number of query heads).
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

    def __post_init__(self):
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

    @property
    def attention(self) -> str:
        """'MHA', 'MQA' or 'GQA', from the ratio of attention heads to KV heads."""
        if self.n_kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else "GQA"

    @property
    def group_size(self) -> int:
        """Query heads that share one KV head (``n_heads // n_kv_heads``)."""
        return self.n_heads // self.n_kv_heads

    def with_kv_heads(self, n_kv_heads: int) -> "ModelSpec":
        """The same model with ``n_kv_heads`` KV heads (e.g. its MHA or MQA variant).

        Parameter counts are recomputed for the K and V projections. Raises ValueError
        if ``n_kv_heads`` does not divide ``n_heads``.
        """
        n_kv_heads = _check.positive_int("n_kv_heads", n_kv_heads)
        delta = 2 * self.n_layers * self.hidden_size * self.head_dim * (n_kv_heads - self.n_kv_heads)
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
            "hidden_act": "silu",
        }
        if cfg["hidden_size"] % cfg["num_attention_heads"]:
            raise ValueError(f"hidden_size ({cfg['hidden_size']}) must be a multiple of "
                             f"n_heads ({cfg['num_attention_heads']})")
        return ModelSpec.from_hf_config(cfg, name=name or f"{self.name} (scaled)")

    @classmethod
    def from_hf_config(cls, cfg, name: str | None = None) -> "ModelSpec":
        """Build a spec from a Hugging Face ``config.json`` (a dict, or a path to the file).

        Reads the usual key spellings (``num_hidden_layers``/``n_layer``,
        ``num_attention_heads``/``n_head``, ...). ``head_dim`` is taken from the config when
        present (it is not always ``hidden_size // num_attention_heads``); an absent
        ``num_key_value_heads`` means MHA; ``multi_query: true`` (Falcon) means one KV head.
        For a mixture of experts (``num_local_experts``) the total parameter count includes
        every expert and ``n_active_params`` only ``num_experts_per_tok`` of them.

        Parameters are counted from the shapes: embeddings (and an untied LM head), Q/K/V/O
        projections, the MLP (gated with three matrices for SiLU models, two otherwise),
        the MoE router and the norms; biases are ignored (well under 0.1%).

        Raises KeyError naming a missing field, ValueError for inconsistent sizes.
        """
        if isinstance(cfg, (str, os.PathLike)):
            with open(cfg) as fh:
                cfg = json.load(fh)
        if not isinstance(cfg, dict):
            raise TypeError(f"cfg must be a config.json dict or a path, got {type(cfg).__name__}")

        def get(*keys, default=None):
            # Counts are checked here, naming the config key, before any arithmetic uses them.
            for k in keys:
                if k in cfg and cfg[k] is not None:
                    return _check.positive_int(f"config {k}", cfg[k])
            if default is None:
                raise KeyError(f"config has none of {keys}")
            return default

        n_layers = get("num_hidden_layers", "n_layer", "num_layers")
        hidden = get("hidden_size", "n_embd", "d_model")
        n_heads = get("num_attention_heads", "n_head")
        if cfg.get("multi_query"):
            n_kv = 1
        else:
            n_kv = get("num_key_value_heads", "num_kv_heads", "n_head_kv", default=n_heads)
        head_dim = get("head_dim", default=hidden // n_heads)
        gated = str(cfg.get("hidden_act", cfg.get("activation", "gelu"))).lower() in ("silu", "swiglu", "swish")
        intermediate = get("intermediate_size", "ffn_hidden_size", default=4 * hidden)
        vocab = get("vocab_size")
        n_experts = get("num_local_experts", "num_experts", default=1)
        per_tok = get("num_experts_per_tok", "num_experts_per_token", default=1) if n_experts > 1 else 1
        tied = bool(cfg.get("tie_word_embeddings", False))

        attn = hidden * head_dim * (2 * n_heads + 2 * n_kv)      # Q and O, K and V
        expert = (3 if gated else 2) * hidden * intermediate
        router = hidden * n_experts if n_experts > 1 else 0
        norms = 2 * hidden
        embed = vocab * hidden * (1 if tied else 2)
        total = n_layers * (attn + n_experts * expert + router + norms) + embed + hidden
        active = n_layers * (attn + per_tok * expert + router + norms) + embed + hidden
        src = cfg.get("_source", "config.json")
        return cls(name=name or cfg.get("_name_or_path") or cfg.get("model_type", "model"),
                   n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv, head_dim=head_dim,
                   hidden_size=hidden, intermediate_size=intermediate, vocab_size=vocab,
                   n_params=total, n_active_params=active, n_experts=n_experts,
                   n_experts_per_token=per_tok, source=src)


def _hf(repo: str) -> str:
    return f"https://huggingface.co/{repo}/blob/main/config.json"


# The fields of each model's published config.json that the parameter count and the KV
# cache depend on (other fields omitted). ``_source`` records where they were read.
_CONFIGS = {
    "llama-2-70b": {"_source": _hf("meta-llama/Llama-2-70b-hf"), "num_hidden_layers": 80,
                    "hidden_size": 8192, "num_attention_heads": 64, "num_key_value_heads": 8,
                    "intermediate_size": 28672, "vocab_size": 32000, "hidden_act": "silu"},
    "llama-3-70b": {"_source": _hf("meta-llama/Meta-Llama-3-70B"), "num_hidden_layers": 80,
                    "hidden_size": 8192, "num_attention_heads": 64, "num_key_value_heads": 8,
                    "intermediate_size": 28672, "vocab_size": 128256, "hidden_act": "silu"},
    "llama-3-8b": {"_source": _hf("meta-llama/Meta-Llama-3-8B"), "num_hidden_layers": 32,
                   "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
                   "intermediate_size": 14336, "vocab_size": 128256, "hidden_act": "silu"},
    "llama-2-7b": {"_source": _hf("meta-llama/Llama-2-7b-hf"), "num_hidden_layers": 32,
                   "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 32,
                   "intermediate_size": 11008, "vocab_size": 32000, "hidden_act": "silu"},
    "mistral-7b": {"_source": _hf("mistralai/Mistral-7B-v0.1"), "num_hidden_layers": 32,
                   "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
                   "intermediate_size": 14336, "vocab_size": 32000, "hidden_act": "silu"},
    "mixtral-8x7b": {"_source": _hf("mistralai/Mixtral-8x7B-v0.1"), "num_hidden_layers": 32,
                     "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
                     "intermediate_size": 14336, "vocab_size": 32000, "hidden_act": "silu",
                     "num_local_experts": 8, "num_experts_per_tok": 2},
    "qwen2.5-7b": {"_source": _hf("Qwen/Qwen2.5-7B"), "num_hidden_layers": 28,
                   "hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4,
                   "intermediate_size": 18944, "vocab_size": 152064, "hidden_act": "silu",
                   "tie_word_embeddings": False},
    "falcon-7b": {"_source": _hf("tiiuae/falcon-7b"), "n_layer": 32, "hidden_size": 4544,
                  "n_head": 71, "multi_query": True, "vocab_size": 65024,
                  "tie_word_embeddings": True},
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
