"""A small decoder with random weights, shaped by a scaled-down ModelSpec, to time on this device.

Its arithmetic is that of a Llama-style block (RMSNorm, GQA attention with a KV cache, a
gated SiLU MLP) and its parameter count equals its spec's ``n_params`` exactly, so the
bytes and FLOPs the roofline predicts are the ones it moves and does. Positional encoding
(RoPE) is left out: it costs O(tokens x hidden), nothing next to the matrix products, and
random weights make the outputs meaningless anyway.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .. import _check
from ..memory import kv_bytes_per_sequence
from ..models import ModelSpec, get_model
from ..roofline import decode_attention_flops_per_step, prefill_attention_flops, prefill_flops
from .ceilings import torch_dtype
from .device import DeviceInfo, pick_device

# Scaled-down Llama-3-8B shapes (GQA, head_dim 128) per device and size. The CPU sizes are
# a few hundred MB of weights: far larger than any CPU cache, so a decode step streams them
# from DRAM as a GPU streams from HBM. The GPU sizes hold over 1 GB of weights.
_TINY = dict(n_layers=1, hidden_size=256, n_heads=2, n_kv_heads=1, intermediate_size=512, vocab_size=512)
_SIZES = {
    ("cpu", "tiny"): _TINY,
    ("gpu", "tiny"): _TINY,
    ("cpu", "small"): dict(n_layers=2, hidden_size=2048, n_heads=16, n_kv_heads=4,
                           intermediate_size=5632, vocab_size=8192),
    ("cpu", "full"): dict(n_layers=6, hidden_size=2048, n_heads=16, n_kv_heads=4,
                          intermediate_size=5632, vocab_size=8192),
    ("gpu", "small"): dict(n_layers=4, hidden_size=4096, n_heads=32, n_kv_heads=8,
                           intermediate_size=14336, vocab_size=32000),
    ("gpu", "full"): dict(n_layers=8, hidden_size=4096, n_heads=32, n_kv_heads=8,
                          intermediate_size=14336, vocab_size=32000),
}


def toy_spec(device: DeviceInfo | None = None, size: str = "small") -> ModelSpec:
    """The toy model's shape: Llama-3-8B scaled down with :meth:`ModelSpec.scaled`.

    ``size``: 'tiny' (tests: a few MB), 'small' (chapters: ~250 MB of bf16 weights on a
    CPU, ~2.2 GB on a GPU) or 'full' (the profile: ~600 MB on a CPU, ~4 GB on a GPU).
    Raises ValueError for another size.
    """
    dev = device or pick_device()
    _check.choice("size", size, {"tiny", "small", "full"})
    key = ("cpu" if dev.kind == "cpu" else "gpu", size)
    return get_model("llama-3-8b").scaled(**_SIZES[key], name=f"toy llama ({size}, {key[0]})")


class ToyDecoder:
    """Random-weight decoder of shape ``spec`` on ``device`` in ``dtype`` (default: the device's).

    ``forward(tokens, cache, start)`` runs one pass over a KV cache made by ``new_cache``;
    it is repeatable (it overwrites the same cache slots), so a prefill or a decode step can
    be timed by calling it again and again. Weights are seeded. ``n_params`` equals
    ``spec.n_params``; ``packed`` says whether the matrices were pre-packed for oneDNN (CPU).
    Raises ValueError for a spec with ``n_experts > 1`` (the toy is dense).
    """

    def __init__(self, spec: ModelSpec, device: DeviceInfo | None = None, dtype: str | None = None,
                 seed: int = 0):
        _check.instance("spec", spec, ModelSpec)
        if spec.n_experts != 1:
            raise ValueError("the toy decoder is dense: spec.n_experts must be 1")
        self.spec, self.device = spec, device or pick_device()
        self.dtype = dtype or self.device.dtype
        dt, kind = torch_dtype(self.dtype), self.device.kind
        g = torch.Generator(device="cpu").manual_seed(seed)
        h, d = spec.hidden_size, spec.head_dim

        def w(rows, cols):
            # Scaled so activations stay O(1); drawn on the CPU so the seed means the same everywhere.
            return (torch.randn(rows, cols, generator=g, dtype=dt) / math.sqrt(cols)).to(kind)

        def ones():
            return torch.ones(h, dtype=dt, device=kind)

        self.embed = w(spec.vocab_size, h)
        # Q, K and V are one matrix, and so are the MLP's gate and up projections, as serving
        # engines store them (vLLM's qkv_proj, gate_up_proj): fewer, larger products.
        self.layers = [dict(attn_norm=ones(), w_qkv=w((spec.n_heads + 2 * spec.n_kv_heads) * d, h),
                            wo=w(h, spec.n_heads * d), mlp_norm=ones(),
                            w_gate_up=w(2 * spec.intermediate_size, h), w_down=w(h, spec.intermediate_size))
                       for _ in range(spec.n_layers)]
        self.final_norm = ones()
        self.lm_head = w(spec.vocab_size, h)
        self.n_params = (self.embed.numel() + self.final_norm.numel() + self.lm_head.numel()
                         + sum(t.numel() for layer in self.layers for t in layer.values()))
        self.bytes_per_param = self.embed.element_size()
        # Matrices are prepared once for the device's matrix kernels (see _prepare).
        self.packed = False
        for layer in self.layers:
            for k in ("w_qkv", "wo", "w_gate_up", "w_down"):
                layer[k] = self._prepare(layer[k])
        self.lm_head = self._prepare(self.lm_head)

    def _prepare(self, weight: torch.Tensor):
        # On a CPU with oneDNN, pre-pack each weight matrix once into oneDNN's blocked layout,
        # as CPU inference stacks do (PyTorch Inductor with freezing, IPEX). Unpacked, every
        # call re-packs the matrix: a decode step then moves its weights about three times and
        # runs at a fraction of the memory bandwidth. Elsewhere the plain tensor is used.
        if self.device.kind == "cpu" and torch.backends.mkldnn.is_available():
            try:
                packed = torch.ops.mkldnn._reorder_linear_weight(weight, None)
                self.packed = True
                return packed
            except (AttributeError, RuntimeError):
                pass
        return weight

    @property
    def weights_read_bytes(self) -> float:
        """Weight bytes one forward pass streams: everything but the embedding table.

        The embedding is a lookup of a few rows, not a read of the table; every other
        weight is read once per pass whatever the batch.
        """
        return (self.n_params - self.spec.vocab_size * self.spec.hidden_size) * self.bytes_per_param

    def kv_bytes_per_sequence(self, context_len: int) -> float:
        """KV-cache bytes of one sequence at ``context_len`` tokens (servelib.memory's formula)."""
        return kv_bytes_per_sequence(self.spec, context_len, self.bytes_per_param)

    def prefill_flops(self, batch: int, prompt_len: int) -> float:
        """FLOPs of one prefill: ``2 P_body * tokens`` + causal attention + the LM head on the last token."""
        lm = self.spec.vocab_size * self.spec.hidden_size
        body = self.n_params - 2 * lm
        return (prefill_flops(body, batch * prompt_len) + prefill_attention_flops(self.spec, prompt_len, batch)
                + prefill_flops(lm, batch))

    def decode_flops(self, batch: int, context_len: int) -> float:
        """FLOPs of one decode step at ``context_len`` cached tokens (weights + attention)."""
        lm = self.spec.vocab_size * self.spec.hidden_size
        return (prefill_flops(self.n_params - lm, batch)
                + decode_attention_flops_per_step(self.spec, context_len + 1, batch))

    def new_cache(self, batch: int, max_len: int) -> torch.Tensor:
        """An empty KV cache ``(n_layers, 2, batch, n_kv_heads, max_len, head_dim)``."""
        s = self.spec
        return torch.empty((s.n_layers, 2, _check.positive_int("batch", batch), s.n_kv_heads,
                            _check.positive_int("max_len", max_len), s.head_dim),
                           dtype=torch_dtype(self.dtype), device=self.device.kind)

    def tokens(self, batch: int, length: int, seed: int = 0) -> torch.Tensor:
        """Seeded random token ids ``(batch, length)`` on the device."""
        g = torch.Generator(device="cpu").manual_seed(seed)
        return torch.randint(0, self.spec.vocab_size, (batch, length), generator=g).to(self.device.kind)

    def _linear(self, x: torch.Tensor, weight) -> torch.Tensor:
        if self.packed:
            return torch.ops.mkldnn._linear_pointwise(x, weight, None, "none", [], "")
        return F.linear(x, weight)

    @torch.inference_mode()
    def forward(self, tokens: torch.Tensor, cache: torch.Tensor, start: int, *,
                all_logits: bool = False) -> torch.Tensor:
        """Run ``tokens`` ``(batch, n)`` at positions ``start .. start+n-1``; logits of the last one.

        Writes their keys and values into ``cache`` and attends to positions ``0 .. start+n-1``
        (causally within the new tokens). Returns ``(batch, vocab_size)``, or with
        ``all_logits`` the logits of every new position ``(batch, n, vocab_size)``, as the
        verification pass of speculative decoding needs.
        """
        s, d = self.spec, self.spec.head_dim
        b, n = tokens.shape
        end = start + n
        x = F.embedding(tokens, self.embed)
        for i, layer in enumerate(self.layers):
            hdn = _rms_norm(x, layer["attn_norm"])
            qkv = self._linear(hdn, layer["w_qkv"]).view(b, n, s.n_heads + 2 * s.n_kv_heads, d).transpose(1, 2)
            q = qkv[:, :s.n_heads]
            cache[i, 0, :, :, start:end] = qkv[:, s.n_heads:s.n_heads + s.n_kv_heads]
            cache[i, 1, :, :, start:end] = qkv[:, s.n_heads + s.n_kv_heads:]
            att = _attention(q, cache[i, 0, :, :, :end], cache[i, 1, :, :, :end], causal=n > 1)
            x = x + self._linear(att.transpose(1, 2).reshape(b, n, s.n_heads * d), layer["wo"])
            hdn = _rms_norm(x, layer["mlp_norm"])
            gate, up = self._linear(hdn, layer["w_gate_up"]).chunk(2, dim=-1)
            x = x + self._linear(F.silu(gate) * up, layer["w_down"])
        last = _rms_norm(x if all_logits else x[:, -1], self.final_norm)
        return self._linear(last, self.lm_head)


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """GQA attention: ``q`` (batch, heads, n, d) over ``k``, ``v`` (batch, kv_heads, ctx, d).

    One new token (decode) is done with two batched matrix products, each KV head serving
    its group of query heads in place; PyTorch's fused CPU kernel is tuned for long query
    blocks and is several times slower than that for a single query. Prefill uses the fused
    kernel.
    """
    b, h, n, d = q.shape
    hkv, ctx = k.shape[1], k.shape[2]
    if n > 1:
        # Each KV head repeated for its query group (a copy of the prompt's K and V, small
        # next to the weights), so that this runs on every torch since 2.1.
        k, v = (t.repeat_interleave(h // hkv, dim=1) for t in (k, v))
        if causal and ctx > n:
            # New tokens after a cached prefix (a verification pass, a prefill chunk): query i
            # sees the prefix and new tokens up to itself. is_causal aligns the mask top-left,
            # which is right only when there is no prefix.
            mask = torch.ones(n, ctx, dtype=torch.bool, device=q.device).tril(ctx - n)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    qg = q.reshape(b, hkv, h // hkv, d)                       # group query heads by KV head
    scores = torch.matmul(qg, k.transpose(-1, -2)) / math.sqrt(d)
    out = torch.matmul(torch.softmax(scores.float(), dim=-1).to(v.dtype), v)
    return out.reshape(b, h, 1, d)


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """RMSNorm over the last dimension, computed in fp32 (``F.rms_norm`` needs torch 2.4)."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight
