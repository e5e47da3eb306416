"""A capacity plan: the deployment, how it will be run and paid for, and the numbers its author claims.

A plan is a frozen :class:`CapacityPlan`, built in code or read from a TOML file (standard
library ``tomllib``) whose tables group the fields::

    [plan]         name, description
    [deployment]   model, gpu, n_gpus, tp_degree, context_len, reserve_fraction, ...
    [model]        config = "path/to/config.json" (relative to the plan file), or the
                   config.json fields themselves; replaces a preset model
    [gpu]          memory_gib, bandwidth_GBps, [gpu.tflops] (dense TFLOP/s per dtype);
                   replaces a preset GPU
    [serving]      batching, max_batch, admission, oversize_requests, shared_tiers, ...
    [workload]     prompt_len, output_lengths, output_fraction, monthly_tokens, ...
    [slo]          ttft_s, tpot_s, percentile
    [claims]       kv_bytes_per_token, concurrency, concurrency_basis
    [payg]         usd_per_1k_input, usd_per_1k_output
    [ptu]          monthly_commitment_usd, capacity_tokens_per_month, break_even_utilization, ...
    [self_hosting] cost_lines, gpu_usd_per_hour, engineering_fte, usd_per_fte_year
    [quantization] weights, claimed_decode_speedup    (a proposal to quantize the weights)
    [speculative]  draft_model, draft_len, acceptance_rate

Every field is validated on construction; a bad value raises :class:`PlanError` naming the
field as ``table.key`` (the spelling of the TOML file), so a plan never becomes a quiet
wrong number.
"""
from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import tomllib
from dataclasses import dataclass, field
from numbers import Integral, Real

from ..hardware import DTYPES, GPUSpec, get_gpu, list_gpus
from ..models import ModelSpec, get_model, list_models
from ..precision import get_precision, list_precisions
from ..units import GiB


class PlanError(ValueError):
    """An invalid capacity plan; ``field`` is the offending ``table.key`` (or the file)."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


# Kinds of value a field may hold; each check returns the normalised value or raises
# PlanError naming the field.
def _number(name, v, *, lo=0.0, lo_open=True, hi=math.inf, hi_open=True):
    if isinstance(v, bool) or not isinstance(v, Real):
        raise PlanError(name, f"must be a number, got {type(v).__name__} {v!r}")
    v = float(v)
    ok_lo = v > lo if lo_open else v >= lo
    ok_hi = v < hi if hi_open else v <= hi
    if math.isnan(v) or not (ok_lo and ok_hi):
        rng = f"{'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
        raise PlanError(name, f"must lie in {rng}, got {v!r}")
    return v


def _integer(name, v, *, lo=1):
    if isinstance(v, bool) or not isinstance(v, Integral):
        raise PlanError(name, f"must be an integer >= {lo}, got {type(v).__name__} {v!r}")
    if v < lo:
        raise PlanError(name, f"must be an integer >= {lo}, got {v!r}")
    return int(v)


def _positive(name, v):
    return _number(name, v)


def _non_negative(name, v):
    return _number(name, v, lo_open=False)


def _fraction(name, v):
    return _number(name, v, lo_open=False, hi=1.0, hi_open=False)


def _reserve(name, v):
    return _number(name, v, lo_open=False, hi=1.0)


def _bytes_per_value(name, v):
    # Number formats for weights or a KV cache lie between 1 bit (1/8 byte) and fp64 (8 bytes);
    # a value outside would overflow the memory arithmetic rather than describe a model.
    return _number(name, v, lo=0.125, lo_open=False, hi=8.0, hi_open=False)


def _percentile(name, v):
    return _number(name, v, lo_open=False, hi=100.0, hi_open=False)


def _open_percentile(name, v):
    return _number(name, v, lo=0.0, hi=100.0)


def _text(name, v):
    if not isinstance(v, str):
        raise PlanError(name, f"must be a string, got {type(v).__name__} {v!r}")
    return v


def _flag(name, v):
    if not isinstance(v, bool):
        raise PlanError(name, f"must be true or false, got {type(v).__name__} {v!r}")
    return v


def _one_of(*allowed):
    def check(name, v):
        _text(name, v)
        key = v.strip().lower()
        if key not in allowed:
            raise PlanError(name, f"must be one of {', '.join(allowed)}; got {v!r}")
        return key
    return check


def _list_of(*allowed):
    def check(name, v):
        if not isinstance(v, (list, tuple)):
            raise PlanError(name, f"must be a list of strings, got {type(v).__name__} {v!r}")
        one = _one_of(*allowed)
        items = tuple(one(f"{name}[{i}]", x) for i, x in enumerate(v))
        if len(set(items)) != len(items):
            raise PlanError(name, f"lists a cost line twice: {list(items)!r}")
        return items
    return check


def _preset(kind, known):
    def check(name, v):
        _text(name, v)
        key = v.strip().lower()
        if key not in known():
            raise PlanError(name, f"unknown {kind} {v!r}; known: {', '.join(known())}")
        return key
    return check


#: Self-hosting cost lines a business case may count: the GPU hours of the instances (idle
#: ones included) and the engineering and on-call staff who run inference.
COST_LINES = ("gpu-hours", "engineering")


def _f(toml: str, check, default=dataclasses.MISSING, doc: str = ""):
    """A plan field read from TOML key ``toml`` (``table.key``), validated by ``check``;
    ``doc`` is written as a comment above the key in TOML files."""
    return field(default=default, metadata={"toml": toml, "check": check, "doc": doc})


@dataclass(frozen=True)
class CapacityPlan:
    """A serving deployment and the numbers its author claims about it (all units in the names).

    Required: ``name``, ``model`` (a :func:`servelib.models.list_models` preset, or a label
    when ``model_config`` gives the config.json fields), ``gpu`` (a
    :func:`servelib.hardware.list_gpus` preset, or a label when ``gpu_table`` gives the
    datasheet: ``memory_gib``, ``bandwidth_GBps``, ``tflops``), ``n_gpus``, ``tp_degree``,
    ``context_len`` (tokens per conversation, prompt plus output), ``reserve_fraction``
    (working space kept out of the KV budget, in [0, 1)), ``prompt_len`` (a typical prompt,
    tokens) and ``max_batch`` (the serving engine's batch limit). The rest have defaults that
    describe a sound plan; ``None`` means "not stated" (no claim, no commitment).

    The economics fields are optional as groups: a ``[ptu]`` table needs
    ``monthly_commitment_usd`` and ``capacity_tokens_per_month``; a ``[self_hosting]`` table
    needs ``cost_lines``, ``gpu_usd_per_hour``, ``engineering_fte`` and ``usd_per_fte_year``.
    Both need ``[payg]`` prices and the workload's ``output_fraction`` and ``monthly_tokens``.
    A latency target (``[slo]``) needs ``ttft_s`` and ``tpot_s``, and the workload's
    ``output_fraction`` and ``monthly_tokens`` (the arrival rate and output length follow).

    Raises :class:`PlanError` (a ValueError) naming the field as ``table.key`` for a missing
    required field, a wrong type, a value out of range, an unknown preset, an incomplete
    group, or fields valid alone that cannot be planned together: a ``dtype`` the GPU has no
    dense rate for, a ``tp_degree`` that does not split the model's heads, money fields whose
    break-even or engineering line overflows a float.
    """

    name: str = _f("plan.name", _text)
    model: str = _f("deployment.model", _preset("model", list_models))
    gpu: str = _f("deployment.gpu", _preset("GPU", list_gpus))
    n_gpus: int = _f("deployment.n_gpus", _integer)
    tp_degree: int = _f("deployment.tp_degree", _integer)
    context_len: int = _f("deployment.context_len", _integer)
    reserve_fraction: float = _f("deployment.reserve_fraction", _reserve)
    prompt_len: int = _f("workload.prompt_len", _integer)
    max_batch: int = _f("serving.max_batch", _integer)
    description: str = _f("plan.description", _text, "")
    n_params: float | None = _f("deployment.n_params", _positive, None,
                                "parameter count for the weights when it differs from the preset's")
    bytes_per_param: float = _f("deployment.bytes_per_param", _bytes_per_value, 2.0)
    kv_bytes_per_elem: float = _f("deployment.kv_bytes_per_elem", _bytes_per_value, 2.0)
    dtype: str = _f("deployment.dtype", _one_of(*DTYPES), "bf16")
    target_concurrency: int = _f("deployment.target_concurrency", _integer, 1,
                                 "conversations the deployment must hold at once")
    batching: str = _f("serving.batching", _one_of("continuous", "static"), "continuous")
    benchmark_batch: int | None = _f("serving.benchmark_batch", _integer, None,
                                     "decode batch of the benchmark the plan's speed figures come from")
    admission: str = _f("serving.admission", _one_of("final", "prompt"), "final")
    oversize_requests: str = _f("serving.oversize_requests", _one_of("reject", "queue"), "reject")
    shared_tiers: bool = _f("serving.shared_tiers", _flag, False,
                            "interactive and batch tiers on one deployment")
    output_lengths: str = _f("workload.output_lengths", _one_of("variable", "fixed"), "variable")
    output_fraction: float | None = _f("workload.output_fraction", _fraction, None,
                                       "fraction of the workload's tokens that are output")
    monthly_tokens: float | None = _f("workload.monthly_tokens", _positive, None)
    claimed_kv_bytes_per_token: float | None = _f("claims.kv_bytes_per_token", _positive, None)
    claimed_concurrency: int | None = _f("claims.concurrency", _integer, None)
    concurrency_basis: str = _f("claims.concurrency_basis", _one_of("kv-memory", "flops"), "kv-memory")
    usd_per_1k_input: float | None = _f("payg.usd_per_1k_input", _positive, None)
    usd_per_1k_output: float | None = _f("payg.usd_per_1k_output", _positive, None)
    monthly_commitment_usd: float | None = _f("ptu.monthly_commitment_usd", _positive, None)
    capacity_tokens_per_month: float | None = _f("ptu.capacity_tokens_per_month", _positive, None,
                                                 "tokens a month at full use, counted as the seller counts them")
    output_token_weight: float = _f("ptu.output_token_weight", _positive, 1.0,
                                    "capacity one output token uses, in input tokens: 1 when capacity is "
                                    "counted in tokens of any kind, the output:input price ratio for a PTU")
    n_ptu: float | None = _f("ptu.n_ptu", _positive, None, "PTUs committed, when the capacity came from them")
    capacity_estimate: str = _f("ptu.capacity_estimate", _one_of("mix-adjusted", "constant"),
                                "mix-adjusted", "how the commitment's token capacity was estimated")
    claimed_break_even_utilization: float | None = _f("ptu.break_even_utilization", _fraction, None)
    break_even_output_fraction: float | None = _f("ptu.break_even_output_fraction", _fraction, None,
                                                  "the output mix the claimed break-even assumed")
    floor_percentile: float | None = _f("ptu.floor_percentile", _percentile, None,
                                        "percentile of demand the dedicated floor is sized to")
    cost_lines: tuple | None = _f("self_hosting.cost_lines", _list_of(*COST_LINES), None)
    gpu_usd_per_hour: float | None = _f("self_hosting.gpu_usd_per_hour", _positive, None)
    engineering_fte: float | None = _f("self_hosting.engineering_fte", _non_negative, None,
                                       "engineers on inference operations, on-call included")
    usd_per_fte_year: float | None = _f("self_hosting.usd_per_fte_year", _non_negative, None)
    quantize_weights: str | None = _f("quantization.weights", _preset("weight format", list_precisions), None,
                                      "format the 16-bit weights would be quantized to (servelib.precision)")
    claimed_quantized_speedup: float | None = _f("quantization.claimed_decode_speedup", _positive, None,
                                                 "decode speed-up the proposal expects from it")
    draft_model: str | None = _f("speculative.draft_model", _preset("model", list_models), None,
                                 "model that drafts tokens for speculative decoding")
    draft_len: int | None = _f("speculative.draft_len", _integer, None, "tokens drafted per round")
    acceptance_rate: float | None = _f("speculative.acceptance_rate", _fraction, None,
                                       "probability that the target accepts a drafted token")
    model_config: dict | None = field(default=None, metadata={"toml": "model", "check": None, "doc": ""})
    model_config_path: str | None = field(default=None, metadata={"toml": "model.config", "check": None,
                                                                  "doc": ""})
    gpu_table: dict | None = field(default=None, metadata={"toml": "gpu", "check": None, "doc": ""})
    pools: str = _f("serving.pools", _one_of("mixed", "disaggregated"), "mixed",
                    "prefill and decode on the same instances (mixed) or on separate pools")
    max_batched_tokens: int | None = _f("serving.max_batched_tokens", _integer, None,
                                        "chunked prefill: tokens per step (not stated: whole prompts in a step)")
    kv_link_Bps: float | None = _f("serving.kv_link_Bps", _positive, None,
                                   "bytes/s of each GPU's link to the other pool (separate pools)")
    ttft_slo_s: float | None = _f("slo.ttft_s", _positive, None, "time-to-first-token target, seconds")
    tpot_slo_s: float | None = _f("slo.tpot_s", _positive, None,
                                  "target for every gap between two output tokens, seconds")
    slo_percentile: float = _f("slo.percentile", _open_percentile, 90.0,
                               "share of requests the TTFT target holds for")

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.metadata["check"] is None or (v is None and f.default is None):
                continue
            check = f.metadata["check"]
            # A [model] or [gpu] table replaces the preset: the name is then only a label.
            if (f.name == "model" and self.model_config is not None) or (
                    f.name == "gpu" and self.gpu_table is not None):
                check = _text
            object.__setattr__(self, f.name, check(f.metadata["toml"], v))
        if self.model_config is not None:
            self.model_spec()              # a bad or partial config is a PlanError naming the field
        if self.gpu_table is not None:
            self.gpu_spec()
        if self.n_gpus % self.tp_degree:
            raise PlanError("deployment.tp_degree",
                            f"must divide deployment.n_gpus ({self.n_gpus}), got {self.tp_degree}")
        self._check_hardware()
        if self.prompt_len >= self.context_len:
            raise PlanError("workload.prompt_len",
                            f"must be shorter than deployment.context_len ({self.context_len}), "
                            f"got {self.prompt_len}")
        self._require_group("ptu", ("monthly_commitment_usd", "capacity_tokens_per_month"),
                            ("usd_per_1k_input", "usd_per_1k_output", "output_fraction", "monthly_tokens"))
        self._require_group("slo", ("ttft_slo_s", "tpot_slo_s"), ("output_fraction", "monthly_tokens"))
        self._require_group("self_hosting", ("cost_lines", "gpu_usd_per_hour", "engineering_fte",
                                             "usd_per_fte_year"),
                            ("usd_per_1k_input", "usd_per_1k_output", "output_fraction", "monthly_tokens"))
        self._require_group("quantization", ("quantize_weights", "claimed_quantized_speedup"), ())
        self._require_group("speculative", ("draft_model", "draft_len", "acceptance_rate"), ())
        self._check_levers()
        self._check_money()

    def _check_hardware(self):
        # Caught here, naming the field, rather than deep in the roofline when the plan is audited.
        gpu, model, tp = self.gpu_spec(), self.model_spec(), self.tp_degree
        if self.dtype not in gpu.flops:
            where = "gpu.tflops gives" if self.gpu_table is not None else "it has"
            raise PlanError("deployment.dtype", f"{self.dtype!r} has no dense rate on {gpu.name} "
                                                f"({where} {', '.join(gpu.flops)}); got {self.dtype!r}")
        if model.n_heads % tp or (model.n_kv_heads % tp and tp % model.n_kv_heads):
            raise PlanError("deployment.tp_degree",
                            f"must split {model.name}'s {model.n_heads} attention heads evenly and divide its "
                            f"{model.n_kv_heads} KV heads (or be a multiple of them), got {tp}")

    def _check_money(self):
        # Each value may lie in range while their combination overflows a float; say which.
        if self.has_ptu:
            from ..economics import break_even_utilization       # economics does not import the audit
            try:
                break_even_utilization(self.monthly_commitment_usd, self.capacity_tokens_per_month,
                                       self.usd_per_1k_input, self.usd_per_1k_output, self.output_fraction,
                                       output_weight=self.output_token_weight)
            except ValueError:
                raise PlanError("ptu.capacity_tokens_per_month",
                                f"is too small for ptu.monthly_commitment_usd ({self.monthly_commitment_usd:g}) "
                                f"at these prices: the break-even utilisation overflows; got "
                                f"{self.capacity_tokens_per_month!r}") from None
        if self.has_self_hosting and not math.isfinite(self.engineering_fte * self.usd_per_fte_year):
            raise PlanError("self_hosting.engineering_fte",
                            f"times self_hosting.usd_per_fte_year ({self.usd_per_fte_year:g}) overflows a float; "
                            f"got {self.engineering_fte!r}")

    def _check_levers(self):
        # A quantization proposal starts from 16-bit weights and goes to a narrower format;
        # a draft must share the target's vocabulary to propose its tokens.
        if self.quantize_weights is not None:
            if self.bytes_per_param != 2:
                raise PlanError("deployment.bytes_per_param",
                                f"must be 2 (16-bit weights) when [quantization] proposes quantizing them, "
                                f"got {self.bytes_per_param:g}")
            if not get_precision(self.quantize_weights).quantized:
                raise PlanError("quantization.weights",
                                f"must be a format narrower than 16 bits, got {self.quantize_weights!r}")
        if self.draft_model is not None and get_model(self.draft_model).vocab_size != self.model_spec().vocab_size:
            raise PlanError("speculative.draft_model",
                            f"must share {self.model}'s vocabulary; {self.draft_model} has another")

    def _require_group(self, table, keys, needs):
        fields = {f.name: f.metadata["toml"] for f in dataclasses.fields(self)}
        in_table = [n for n, t in fields.items() if t.startswith(table + ".")
                    and getattr(self, n) is not None
                    and getattr(self, n) != CapacityPlan.__dataclass_fields__[n].default]
        if not in_table:
            return
        for n in keys + needs:
            if getattr(self, n) is None:
                raise PlanError(fields[n], f"is required when the plan has a [{table}] table")

    def model_spec(self) -> ModelSpec:
        """The model: the ``[model]`` table's config.json, or the preset ``deployment.model``.

        Raises :class:`PlanError` naming ``model`` and the config field for a bad or partial
        config (see :meth:`servelib.models.ModelSpec.from_hf_config`).
        """
        if self.model_config is None:
            return get_model(self.model)
        where = f"model ({self.model_config_path})" if self.model_config_path else "model"
        try:
            return ModelSpec.from_hf_config(self.model_config, name=self.model)
        except KeyError as e:
            raise PlanError(where, f"the config.json is incomplete: {e.args[0]}") from None
        except (ValueError, TypeError) as e:
            raise PlanError(where, str(e)) from None

    def gpu_spec(self) -> GPUSpec:
        """The accelerator: the ``[gpu]`` table, or the preset ``deployment.gpu``.

        The table gives ``memory_gib`` (GiB), ``bandwidth_GBps`` (GB/s, decimal) and
        ``tflops`` (a table of dense TFLOP/s per dtype, e.g. ``bf16 = 989.5``), and
        optionally ``source``. Raises :class:`PlanError` naming ``gpu.<key>``.
        """
        if self.gpu_table is None:
            return get_gpu(self.gpu)
        t = dict(self.gpu_table)
        known = {"memory_gib", "bandwidth_GBps", "tflops", "source"}
        for k in t:
            if k not in known:
                raise PlanError(f"gpu.{k}", f"unknown key; known keys of [gpu]: {', '.join(sorted(known))}")
        for k in ("memory_gib", "bandwidth_GBps", "tflops"):
            if k not in t:
                raise PlanError(f"gpu.{k}", "is required in a [gpu] table")
        tflops = t["tflops"]
        if not isinstance(tflops, dict) or not tflops:
            raise PlanError("gpu.tflops", "must be a table of dtype = dense TFLOP/s, e.g. bf16 = 989.5")
        flops = {}
        for dt, v in tflops.items():
            if dt not in DTYPES:
                raise PlanError(f"gpu.tflops.{dt}", f"unknown dtype; known: {', '.join(DTYPES)}")
            flops[dt] = _positive(f"gpu.tflops.{dt}", v) * 1e12
        return GPUSpec(self.gpu, _positive("gpu.memory_gib", t["memory_gib"]) * GiB,
                       _positive("gpu.bandwidth_GBps", t["bandwidth_GBps"]) * 1e9, flops,
                       _text("gpu.source", t.get("source", "plan's [gpu] table")))

    @property
    def has_ptu(self) -> bool:
        """True when the plan includes a PTU commitment."""
        return self.monthly_commitment_usd is not None

    @property
    def has_self_hosting(self) -> bool:
        """True when the plan includes a self-hosting business case."""
        return self.cost_lines is not None


def _toml_names() -> dict:
    return {f.metadata["toml"]: f.name for f in dataclasses.fields(CapacityPlan) if f.metadata["check"]}


def _model_table(body: dict, base_dir) -> dict:
    """Keyword arguments for a ``[model]`` table: a config file's path, or inline fields."""
    if not isinstance(body, dict):
        raise PlanError("model", f"must be a table ([model]), got {type(body).__name__}")
    body = dict(body)
    name = body.pop("name", None)
    if "config" in body:
        rel = _text("model.config", body.pop("config"))
        if body:
            raise PlanError(f"model.{next(iter(body))}",
                            "give either config = \"path\" or the config.json fields, not both")
        path = pathlib.Path(base_dir or ".") / rel
        try:
            cfg = json.loads(path.read_text())
        except OSError as e:
            raise PlanError("model.config", f"cannot read {rel}: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise PlanError("model.config", f"{rel} is not valid JSON: {e.msg} at line {e.lineno}") from None
        if not isinstance(cfg, dict):
            raise PlanError("model.config", f"{rel} must hold a JSON object")
        out = {"model_config": cfg, "model_config_path": rel}
    else:
        if not body:
            raise PlanError("model", "needs config = \"path/to/config.json\" or the config.json fields")
        out = {"model_config": body}
    out["model"] = _text("model.name", name) if name is not None else (
        out.get("model_config_path") or "config.json")
    return out


def plan_from_dict(data: dict, base_dir=None) -> CapacityPlan:
    """A :class:`CapacityPlan` from the nested dict of a parsed TOML plan (tables of keys).

    ``[model]`` (a config.json's path, relative to ``base_dir``, or its fields) and
    ``[gpu]`` (memory, bandwidth, FLOP/s) replace the presets ``deployment.model`` and
    ``deployment.gpu``, which may then be left out. Raises :class:`PlanError` naming
    ``table.key`` for an unknown table or key (a typo must not silently drop a field), a
    missing required field, a bad or partial config, or any invalid value.
    """
    names = _toml_names()
    tables = {t.split(".")[0] for t in names}
    kwargs = {}
    data = dict(data)
    if "model" in data:
        kwargs.update(_model_table(data.pop("model"), base_dir))
    if "gpu" in data:
        body = data.pop("gpu")
        if not isinstance(body, dict):
            raise PlanError("gpu", f"must be a table ([gpu]), got {type(body).__name__}")
        kwargs["gpu_table"] = body
        kwargs["gpu"] = "gpu"
    for table, body in data.items():
        if table not in tables:
            raise PlanError(table, f"unknown table; known tables: {', '.join(sorted(tables | {'model', 'gpu'}))}")
        if not isinstance(body, dict):
            raise PlanError(table, f"must be a table ([{table}]), got {type(body).__name__}")
        for key, value in body.items():
            dotted = f"{table}.{key}"
            if dotted not in names:
                known = sorted(k.split(".")[1] for k in names if k.startswith(table + "."))
                raise PlanError(dotted, f"unknown key; known keys of [{table}]: {', '.join(known)}")
            if dotted in ("deployment.model", "deployment.gpu") and names[dotted] in kwargs:
                if dotted == "deployment.gpu":
                    kwargs["gpu"] = value            # the [gpu] table's label
                    continue
            kwargs[names[dotted]] = value
    for f in dataclasses.fields(CapacityPlan):
        if f.default is dataclasses.MISSING and f.name not in kwargs:
            raise PlanError(f.metadata["toml"], "is required but missing")
    return CapacityPlan(**kwargs)


def parse_plan(text: str, base_dir=None) -> CapacityPlan:
    """A :class:`CapacityPlan` from TOML text; :class:`PlanError` if the TOML or a field is invalid.

    ``base_dir``: where a ``[model] config`` path is relative to (default: the current folder).
    Raises TypeError if ``text`` is not a string (read a file with :func:`load_plan`)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a string of TOML, got {type(text).__name__}")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PlanError("TOML", str(e)) from None
    return plan_from_dict(data, base_dir)


def load_plan(path) -> CapacityPlan:
    """A :class:`CapacityPlan` read from the TOML file at ``path``.

    Raises :class:`PlanError` (naming the file) if it cannot be read, and as
    :func:`parse_plan` for its content.
    """
    try:
        with open(path, "rb") as fh:
            text = fh.read().decode("utf-8")
    except OSError as e:
        raise PlanError(str(path), f"cannot read the plan: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise PlanError(str(path), f"is not UTF-8 text (TOML must be): {e.reason} at byte {e.start}") from None
    return parse_plan(text, pathlib.Path(path).parent)


def _toml_key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() else _toml_value(k)


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):                    # an inline table; TOML has no null, so None keys go
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items() if x is not None) + "}"
    if float(v).is_integer() and abs(v) < 2**53:
        return f"{int(v):_}"          # 70_000_000_000 reads better than 70000000000.0
    return repr(v)


def plan_to_toml(plan: CapacityPlan) -> str:
    """The plan as TOML text that :func:`parse_plan` reads back to an equal plan.

    Only stated fields are written: those that are not ``None`` and, apart from the
    required ones, differ from their default. Fields whose meaning is not plain from the
    key get a comment line above them.
    """
    by_table: dict[str, list[str]] = {}
    for f in dataclasses.fields(CapacityPlan):
        v = getattr(plan, f.name)
        if v is None or (f.default is not dataclasses.MISSING and v == f.default) or not f.metadata["check"]:
            continue
        if (f.name == "model" and plan.model_config is not None) or (f.name == "gpu" and plan.gpu_table):
            continue                                   # written in their own tables below
        table, key = f.metadata["toml"].split(".")
        doc = f"# {f.metadata['doc']}\n" if f.metadata["doc"] else ""
        by_table.setdefault(table, []).append(f"{doc}{key} = {_toml_value(v)}")
    if plan.model_config is not None:
        lines = [f"name = {_toml_value(plan.model)}"]
        if plan.model_config_path:
            lines.append(f"config = {_toml_value(plan.model_config_path)}")
        else:
            lines += [f"{_toml_key(k)} = {_toml_value(x)}" for k, x in plan.model_config.items() if x is not None]
        by_table["model"] = lines
    if plan.gpu_table:
        by_table.setdefault("deployment", []).insert(0, f"gpu = {_toml_value(plan.gpu)}")
        by_table["gpu"] = [f"{_toml_key(k)} = {_toml_value(x)}" for k, x in plan.gpu_table.items()]
    order = ["plan", "deployment", "model", "gpu", "serving", "workload", "slo", "claims", "payg", "ptu",
             "self_hosting", "quantization", "speculative"]
    return "\n".join(f"[{t}]\n" + "\n".join(by_table[t]) + "\n" for t in order if t in by_table)
