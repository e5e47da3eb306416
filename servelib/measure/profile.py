"""A hardware profile: the ceilings, prefill and decode, and a batching sweep, as one JSON record.

``python -m servelib.measure [--quick] --out profile.json`` writes one; the book keeps
profiles measured with it under ``book/data/`` and plots them beside the live figures.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import pathlib
import platform
import time
from dataclasses import asdict

import torch

from .ceilings import measure_ceilings
from .device import DeviceInfo, pick_device
from .phases import batching_sweep, time_decode, time_prefill
from .toy import ToyDecoder, toy_spec

#: Fields every profile has (``load_profile`` checks them).
REQUIRED = ("device", "torch", "dtype", "date", "copy_bandwidth_Bps", "matmul_flops", "prefill",
            "decode", "batching_sweep", "model")

#: Sizes per (device class, quick): prompt length, decode context and the sweep's batches.
_PLAN = {
    ("cpu", True): dict(size="small", prompt_len=256, context_len=128, batches=(1, 2, 4, 8, 16, 32, 64)),
    ("cpu", False): dict(size="full", prompt_len=512, context_len=256, batches=(1, 2, 4, 8, 16, 32, 64, 128)),
    ("gpu", True): dict(size="small", prompt_len=1024, context_len=512,
                        batches=(1, 2, 4, 8, 16, 32, 64, 128, 256)),
    ("gpu", False): dict(size="full", prompt_len=2048, context_len=1024,
                         batches=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)),
}


def profile_plan(device: DeviceInfo, quick: bool = False) -> dict:
    """The sizes a profile uses on ``device``: toy size, prompt and context lengths, batches."""
    return dict(_PLAN[("cpu" if device.kind == "cpu" else "gpu", bool(quick))])


def _device_record(dev: DeviceInfo) -> dict:
    rec = dev.as_dict()
    rec["threads"] = torch.get_num_threads()
    rec["platform"] = platform.platform()
    if dev.kind == "cuda":
        rec["cuda"] = torch.version.cuda
        try:
            import subprocess
            rec["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, check=True).stdout.strip().splitlines()[0]
        except (OSError, subprocess.CalledProcessError, IndexError):
            rec["driver"] = None
    return rec


def measure_profile(quick: bool = False, device: DeviceInfo | None = None, dtype: str | None = None,
                    progress=None) -> dict:
    """Measure this machine and return the profile as a plain dict (see :data:`REQUIRED`).

    Steps: copy bandwidth and matmul FLOP/s; the toy decoder (:func:`toy_spec`) built;
    prefill of one prompt and one decode step at batch 1, each with its roofline
    prediction from the measured ceilings; the batching sweep (which stops at an
    out-of-memory and records the batch). ``progress``, if given, receives a line of text
    per step. ``quick`` uses smaller sizes (under a minute on a 2-core CPU).
    """
    dev = device or pick_device()
    dtype = dtype or dev.dtype
    plan = profile_plan(dev, quick)
    say = progress or (lambda line: None)
    t0 = time.perf_counter()

    def step(i, what):
        say(f"[{i}/5 {time.perf_counter() - t0:5.1f} s] {what}")

    step(1, f"ceilings on {dev.kind} ({dev.name}), {dtype}, torch {dev.torch}")
    ceil = measure_ceilings(dev, dtype)
    say(f"    copy {ceil.copy_bandwidth_Bps / 1e9:.1f} GB/s, matmul {ceil.matmul_flops / 1e12:.3f} TFLOP/s, "
        f"ridge {ceil.ridge:.1f} FLOP/byte")
    spec = toy_spec(dev, plan["size"])
    step(2, f"building {spec.name}: {spec.n_params / 1e6:.0f}M parameters")
    model = ToyDecoder(spec, dev, dtype)
    step(3, f"prefill of {plan['prompt_len']} tokens")
    pre = time_prefill(model, plan["prompt_len"], 1, ceil)
    step(4, f"decode at batch 1, context {plan['context_len']}")
    dec = time_decode(model, plan["context_len"], 1, ceil)
    step(5, f"batching sweep over {list(plan['batches'])}")
    sweep = batching_sweep(model, plan["batches"], plan["context_len"], ceil,
                           progress=lambda line: say("    " + line))
    say(f"done in {time.perf_counter() - t0:.1f} s")
    return {
        "device": _device_record(dev),
        "torch": torch.__version__,
        "dtype": dtype,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "quick": bool(quick),
        "copy_bandwidth_Bps": ceil.copy_bandwidth_Bps,
        "matmul_flops": ceil.matmul_flops,
        "ridge_flop_per_byte": ceil.ridge,
        "model": {"name": spec.name, "n_layers": spec.n_layers, "hidden_size": spec.hidden_size,
                  "n_heads": spec.n_heads, "n_kv_heads": spec.n_kv_heads, "head_dim": spec.head_dim,
                  "intermediate_size": spec.intermediate_size, "vocab_size": spec.vocab_size,
                  "n_params": spec.n_params, "weights_read_bytes": model.weights_read_bytes},
        "prefill": pre.as_dict(),
        "decode": dec.as_dict(),
        "batching_sweep": [asdict(p) for p in sweep.points],
        "sweep_context_len": sweep.context_len,
        "sweep_stopped_at": sweep.stopped_at,
        "sweep_stop_reason": sweep.stop_reason,
        "wall_s": time.perf_counter() - t0,
    }


def save_profile(profile: dict, path) -> pathlib.Path:
    """Write ``profile`` as indented JSON to ``path`` (folders created); return the path."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(profile, indent=1) + "\n")
    return path


def load_profile(path) -> dict:
    """Read a profile written by :func:`save_profile`; KeyError names a missing field,
    ValueError (naming the file) a file that is not JSON."""
    with open(path) as fh:
        try:
            prof = json.load(fh)
        except json.JSONDecodeError as err:
            raise ValueError(f"{os.fspath(path)} is not a hardware profile: not JSON ({err})") from None
    if not isinstance(prof, dict):
        raise ValueError(f"{os.fspath(path)} is not a hardware profile: not a JSON object")
    missing = [k for k in REQUIRED if k not in prof]
    if missing:
        raise KeyError(f"{os.fspath(path)} is not a hardware profile: missing {missing}")
    return prof


def load_profiles(directory) -> list[dict]:
    """Every ``*.json`` profile in ``directory`` (sorted by file name), each with its ``file``.

    A missing directory gives an empty list, so a notebook opened outside the repository
    (on Colab, say) still runs with its live measurement alone.
    """
    out = []
    for p in sorted(pathlib.Path(directory).glob("*.json")):
        prof = load_profile(p)
        prof["file"] = p.name
        out.append(prof)
    return out


def profile_label(profile: dict) -> str:
    """A short legend label: device name, dtype, the toy model's size and the date."""
    dev = profile["device"]
    name = dev.get("name", "?") if isinstance(dev, dict) else str(dev)
    return f"{name} ({profile['dtype']}, {profile['model']['n_params'] / 1e6:.0f}M toy, {profile['date'][:10]})"


def describe(profile: dict) -> str:
    """One line saying where and how a profile was measured: device, threads, dtype, torch, sizes, date."""
    dev, m = profile["device"], profile["model"]
    threads = f", {dev['threads']} threads" if dev.get("threads") else ""
    return (f"{dev.get('kind', '?')} ({dev.get('name', '?')}{threads}), {profile['dtype']}, torch {profile['torch']}, "
            f"toy model {m['n_params'] / 1e6:.0f}M params ({m['n_layers']} layers, hidden {m['hidden_size']}), "
            f"prompt {profile['prefill']['new_tokens']}, context {profile['decode']['context_len']}, "
            f"{profile['date'][:10]}")
