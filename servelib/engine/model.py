"""The toy decoder's forward pass over a mixed batch, reading the KV cache through block tables.

One step of a serving engine runs, in a single forward pass, one new token for each decoding
sequence and a chunk of prompt for each prefilling one. Every token goes through the same
matrix products (so the weights are read once for the whole step: that is why batching
pays); only attention differs per sequence, because each reads its own cache. Here the
cache is paged (:class:`~servelib.engine.cache.PagedKVCache`): keys and values are written to
the token slots the block table names, and read back by gathering the sequence's blocks.

The weights, the embedding, the norms and the MLP are those of
:class:`servelib.measure.ToyDecoder`, so the engine's logits can be checked against that
plain contiguous-cache decoder token for token.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .. import _check
from ..measure.toy import ToyDecoder, _rms_norm
from ..measure.ceilings import torch_dtype
from ..models import get_model
from .cache import PagedKVCache

# The engine's toy models: Llama-3-8B's shape family, small enough that a CPU runs the
# chapter's thousands of steps in seconds (the measure chapters' "small" toy takes ~15 ms a
# step on one CPU core, this one about 1 ms). GPU sizes hold ~1 GB of weights, so that a
# step is not all kernel-launch overhead.
_ENGINE_SIZES = {
    ("cpu", "tiny"): dict(n_layers=1, hidden_size=256, n_heads=2, n_kv_heads=1, intermediate_size=512,
                          vocab_size=512),
    ("cpu", "small"): dict(n_layers=2, hidden_size=512, n_heads=4, n_kv_heads=1, intermediate_size=1536,
                           vocab_size=2048),
    ("gpu", "tiny"): dict(n_layers=1, hidden_size=256, n_heads=2, n_kv_heads=1, intermediate_size=512,
                          vocab_size=512),
    ("gpu", "small"): dict(n_layers=4, hidden_size=2048, n_heads=16, n_kv_heads=4, intermediate_size=7168,
                           vocab_size=32000),
}


# On a CPU, PyTorch's bf16 matrix products (oneDNN) build a kernel the first time they meet a
# shape, about half a millisecond each, and a step's shapes (its tokens, its longest context)
# change almost every step: untreated, a step would cost what its shape's history dictates.
# So the CPU engine pads, as GPU engines pad a step to one of a few captured batch sizes:
# rows to a multiple of 8 (up to 64; beyond, of 32), keys to a multiple of 32 (up to 256;
# beyond, of 64, and of 128 past 512), and a warm-up meets every shape a run will
# (:func:`warm_shapes`). oneDNN keeps 1,024 kernels; a chapter's workload needs a few hundred.


def padded_rows(rows: int) -> int:
    """Rows the CPU engine's matrix products run for ``rows`` tokens: the count itself up to
    8, then the next multiple of 8 up to 64, then of 32. Raises unless ``rows`` is an
    integer >= 0 (0: a step that wants no logits runs the output layer over no rows)."""
    if type(rows) is not int or rows < 0:     # the full check only off the per-layer fast path
        rows = _check.non_negative_int("rows", rows)
    step = 1 if rows <= 8 else 8 if rows <= 64 else 32
    return -(-rows // step) * step


def padded_keys(keys: int) -> int:
    """Keys the CPU engine's decode attention reads for a longest context of ``keys``: the
    next multiple of 32 up to 256, of 64 up to 512, then of 128 (extra keys are masked).
    Raises unless ``keys`` is an integer >= 1."""
    if type(keys) is not int or keys < 1:
        keys = _check.positive_int("keys", keys)
    step = 32 if keys <= 256 else 64 if keys <= 512 else 128
    return -(-keys // step) * step


@torch.inference_mode()
def warm_shapes(model: ToyDecoder, *, max_rows: int, max_batch: int, max_context: int) -> int:
    """Run every matrix product of ``model`` once at each shape the CPU engine meets in steps
    of up to ``max_rows`` tokens, ``max_batch`` decode rows and ``max_context`` keys
    (:func:`padded_rows`, :func:`padded_keys`), so that no later step pays for building a
    kernel. Does nothing off a CPU. Returns the number of shapes warmed. Raises TypeError
    unless ``model`` is a :class:`ToyDecoder`, ValueError/TypeError unless each size is an
    integer >= 1."""
    _check.instance("model", model, ToyDecoder)
    max_rows = _check.positive_int("max_rows", max_rows)
    max_batch = _check.positive_int("max_batch", max_batch)
    max_context = _check.positive_int("max_context", max_context)
    if model.device.kind != "cpu":
        return 0
    s, dt = model.spec, torch_dtype(model.dtype)
    layer = model.layers[0]
    products = ((s.hidden_size, layer["w_qkv"]), (s.n_heads * s.head_dim, layer["wo"]),
                (s.hidden_size, layer["w_gate_up"]), (s.intermediate_size, layer["w_down"]),
                (s.hidden_size, model.lm_head))
    shapes = 0
    for rows in sorted({padded_rows(t) for t in range(1, max_rows + 1)}):
        for width, weight in products:
            model._linear(torch.zeros(rows, width, dtype=dt), weight)
            shapes += 1
    hkv, d = s.n_kv_heads, s.head_dim
    group = s.n_heads // hkv
    for keys in sorted({padded_keys(n) for n in range(1, max_context + 1)}):
        for b in sorted({padded_rows(n) for n in range(1, max_batch + 1)}):
            q, k = torch.zeros(b, hkv, group, d, dtype=dt), torch.zeros(b, keys, hkv, d, dtype=dt)
            p = torch.matmul(q, k.permute(0, 2, 3, 1))
            torch.matmul(p, k.transpose(1, 2))
            shapes += 2
    return shapes


def engine_spec(device_kind: str = "cpu", size: str = "small"):
    """The engine's toy model: Llama-3-8B scaled down (:meth:`ModelSpec.scaled`).

    ``device_kind``: 'cpu', 'cuda' or 'mps' (GPUs get the larger sizes). ``size``: 'tiny'
    (tests: well under a millisecond a step) or 'small' (the chapter: about 8M parameters
    on a CPU, about 0.5B on a GPU). Raises ValueError for another size or device kind.
    """
    if device_kind not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device_kind must be 'cpu', 'cuda' or 'mps', got {device_kind!r}")
    if size not in ("tiny", "small"):
        raise ValueError(f"size must be 'tiny' or 'small', got {size!r}")
    key = ("cpu" if device_kind == "cpu" else "gpu", size)
    return get_model("llama-3-8b").scaled(**_ENGINE_SIZES[key], name=f"engine toy ({size}, {key[0]})")


@dataclass
class Batch:
    """One step's inputs, as tensors on the device (built by the engine from its block tables).

    Rows are tokens. The first ``n_single`` rows are one token per sequence (decode rows, and
    the padding rows of a static batch), attending to ``single_lens[r]`` keys through the block
    table ``single_tables[r]`` (padded to the longest); ``single_max_len`` is the longest and
    ``single_uniform`` says whether every row has that length. Then come prefill chunks: ``chunks``
    lists ``(first row, tokens, first position, block table)``. ``ids``: token ids ``(T,)``;
    ``slots``: the cache slot each row's K and V are written to ``(T,)``; ``logit_rows``: rows
    whose next-token logits are wanted ``(R,)``.
    """

    ids: torch.Tensor
    slots: torch.Tensor
    n_single: int
    single_tables: torch.Tensor | None
    single_lens: torch.Tensor | None
    chunks: list
    logit_rows: torch.Tensor
    single_max_len: int = 0
    single_uniform: bool = True


class PagedDecoder:
    """:class:`ToyDecoder`'s weights run over a :class:`PagedKVCache`."""

    def __init__(self, model: ToyDecoder, cache: PagedKVCache):
        self.model, self.cache, self.spec = model, cache, model.spec
        self.pad_shapes = model.device.kind == "cpu"

    @torch.inference_mode()
    def forward(self, b: Batch) -> torch.Tensor:
        """Run one step; return the logits of ``b.logit_rows``, ``(R, vocab_size)``.

        Writes every row's key and value to its slot first, so a prefill chunk attends to
        the earlier chunks of its prompt and to itself through the same cache reads.
        """
        m, s, cache = self.model, self.spec, self.cache
        d, h, hkv = s.head_dim, s.n_heads, s.n_kv_heads
        t, ns = b.ids.shape[0], b.n_single
        # Masks depend on the step, not the layer: built once. Decode rows mask the padding
        # beyond their own length; a chunk after earlier chunks masks keys beyond each query.
        tables, n_keys, pad = _decode_layout(b, cache.block_size, self.pad_shapes) if ns else (None, 0, None)
        chunk_masks = [None if start == 0 else
                       torch.arange(start + n, device=b.ids.device)[None, :]
                       <= torch.arange(start, start + n, device=b.ids.device)[:, None]
                       for _, n, start, _ in b.chunks]

        def linear(a, weight):
            n = a.shape[0]
            rows = padded_rows(n) if self.pad_shapes else n
            if rows == n:
                return m._linear(a, weight)
            return m._linear(F.pad(a, (0, 0, 0, rows - n)), weight)[:n]

        x = F.embedding(b.ids, m.embed)
        for i, layer in enumerate(m.layers):
            k_cache, v_cache = cache.layer(i)
            hdn = _rms_norm(x, layer["attn_norm"])
            qkv = linear(hdn, layer["w_qkv"]).view(t, h + 2 * hkv, d)
            q = qkv[:, :h]
            k_cache.index_copy_(0, b.slots, qkv[:, h:h + hkv])
            v_cache.index_copy_(0, b.slots, qkv[:, h + hkv:])
            if ns == t:       # decode rows only: no chunk to place beside them
                att = _single_token_attention(q, k_cache, v_cache, tables, n_keys, pad, cache.block_size)
            else:
                att = torch.empty_like(q)
                if ns:
                    att[:ns] = _single_token_attention(q[:ns], k_cache, v_cache, tables, n_keys, pad,
                                                       cache.block_size)
                for (row, n, start, table), mask in zip(b.chunks, chunk_masks):
                    att[row:row + n] = _chunk_attention(q[row:row + n], k_cache, v_cache, table, start, mask,
                                                        cache.block_size)
            x = x + linear(att.reshape(t, h * d), layer["wo"])
            hdn = _rms_norm(x, layer["mlp_norm"])
            gate, up = linear(hdn, layer["w_gate_up"]).chunk(2, dim=-1)
            x = x + linear(F.silu(gate) * up, layer["w_down"])
        last = _rms_norm(x.index_select(0, b.logit_rows), m.final_norm)
        return linear(last, m.lm_head)


def _gather(cache: torch.Tensor, tables: torch.Tensor, block_size: int) -> torch.Tensor:
    """The tokens of the blocks ``tables`` ``(rows, n_blocks)``: ``(rows, n_blocks * block_size, kv_heads, d)``."""
    rows, nb = tables.shape
    blocks = cache.view(-1, block_size, *cache.shape[1:]).index_select(0, tables.reshape(-1))
    return blocks.view(rows, nb * block_size, *cache.shape[1:])


def _decode_layout(b: Batch, block_size: int, pad_shapes: bool):
    """Block tables, key count and mask for a step's decode rows: ``(tables, n_keys, pad)``.

    ``pad`` ``(rows, n_keys)`` is True at each row's keys beyond its own length (None when
    every row has all ``n_keys``). With ``pad_shapes`` (the CPU engine) rows and keys are
    padded (:func:`padded_rows`, :func:`padded_keys`); padding rows and blocks point at block
    0, whose keys are masked or whose rows are dropped.
    """
    tables, lens, n_keys = b.single_tables, b.single_lens, b.single_max_len
    if pad_shapes:
        n_keys = padded_keys(n_keys)
        rows, n_blocks = padded_rows(tables.shape[0]), -(-n_keys // block_size)
        padded = tables.new_zeros(rows, n_blocks)
        width = min(n_blocks, tables.shape[1])
        padded[:tables.shape[0], :width] = tables[:, :width]
        tables, lens = padded, F.pad(lens, (0, rows - lens.shape[0]), value=n_keys)
    pad = None
    if not (b.single_uniform and n_keys == b.single_max_len):
        pad = torch.arange(n_keys, device=lens.device) >= lens[:, None]
    return tables, n_keys, pad


def _single_token_attention(q, k_cache, v_cache, tables, n_keys, pad, block_size):
    """Attention of one new token per row: ``q`` ``(B, heads, d)`` against the first ``n_keys``
    keys gathered through each row's block table (``tables`` may hold padding rows beyond B,
    whose results are dropped; ``pad`` as :func:`_decode_layout` makes it). Then two batched
    matrix products, as the toy decoder's decode step does: each KV head serves its group of
    query heads.
    """
    bsz, h, d = q.shape
    rows = tables.shape[0]
    k = _gather(k_cache, tables, block_size)[:, :n_keys]              # (rows, n_keys, kv_heads, d)
    v = _gather(v_cache, tables, block_size)[:, :n_keys]
    hkv = k.shape[2]
    qg = F.pad(q, (0, 0, 0, 0, 0, rows - bsz)).view(rows, hkv, h // hkv, d)
    scores = torch.matmul(qg, k.permute(0, 2, 3, 1)) / math.sqrt(d)    # (rows, kv_heads, group, n_keys)
    scores = scores.float()
    if pad is not None:
        scores = scores.masked_fill(pad[:, None, None, :], -math.inf)
    out = torch.matmul(torch.softmax(scores, dim=-1).to(v.dtype), v.transpose(1, 2))   # (rows, kv_heads, group, d)
    return out[:bsz].reshape(bsz, h, d)


def _chunk_attention(q, k_cache, v_cache, table, start, mask, block_size):
    """Causal attention of a prompt chunk ``q`` ``(n, heads, d)`` at positions ``start ..
    start+n-1`` over the sequence's keys ``0 .. start+n-1`` (the fused kernel, as the toy
    decoder's prefill). ``mask`` ``(n, start+n)``: which keys each query sees (None when
    ``start`` is 0: plain causal)."""
    n, h, d = q.shape
    end = start + n
    k = _gather(k_cache, table[None], block_size)[0, :end]     # (end, kv_heads, d)
    v = _gather(v_cache, table[None], block_size)[0, :end]
    hkv = k.shape[1]
    k, v = (t.transpose(0, 1).repeat_interleave(h // hkv, dim=0)[None] for t in (k, v))   # (1, heads, end, d)
    qh = q.transpose(0, 1)[None]                                                         # (1, heads, n, d)
    if mask is None:
        out = F.scaled_dot_product_attention(qh, k, v, is_causal=True)
    else:
        out = F.scaled_dot_product_attention(qh, k, v, attn_mask=mask)
    return out[0].transpose(0, 1)
