"""Which device to measure on, and in which dtype."""
from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass

import torch


@dataclass(frozen=True)
class DeviceInfo:
    """The device a measurement runs on.

    ``kind``: 'cuda', 'mps' or 'cpu'. ``name``: the product name (CUDA) or processor.
    ``dtype``: the 16-bit dtype measurements use there ('bf16' where the hardware has bf16
    matrix units, 'fp16' on older GPUs such as the T4; on a CPU 'bf16' where oneDNN reports
    native bf16 instructions such as AVX512-BF16 or AMX, else 'fp32', because elsewhere
    16-bit matrix products are emulated and slower). ``memory_bytes``: device memory that
    torch reports (CUDA), else None. ``torch``: the torch version.
    """

    kind: str
    name: str
    dtype: str
    memory_bytes: int | None
    torch: str

    @property
    def torch_dtype(self) -> torch.dtype:
        """The ``torch.dtype`` for :attr:`dtype`."""
        return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[self.dtype]

    def __str__(self) -> str:
        """One line to print beside a figure, e.g. 'cuda (NVIDIA H200), dtype bf16, torch 2.13.0'."""
        return f"{self.kind} ({self.name}), dtype {self.dtype}, torch {self.torch}"

    def as_dict(self) -> dict:
        """A plain dict, for JSON."""
        return asdict(self)


def pick_device(prefer: str | None = None) -> DeviceInfo:
    """CUDA if available, else Apple MPS, else CPU (or ``prefer``: 'cuda', 'mps', 'cpu').

    Raises ValueError for an unknown ``prefer`` and RuntimeError if the preferred device is
    not available here.
    """
    avail = {"cuda": torch.cuda.is_available(),
             "mps": getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available(),
             "cpu": True}
    if prefer is not None:
        if prefer not in avail:
            raise ValueError(f"prefer must be one of {sorted(avail)}, got {prefer!r}")
        if not avail[prefer]:
            raise RuntimeError(f"device {prefer!r} is not available on this machine")
        kind = prefer
    else:
        kind = next(k for k in ("cuda", "mps", "cpu") if avail[k])
    if kind == "cuda":
        props = torch.cuda.get_device_properties(0)
        dtype = "bf16" if torch.cuda.is_bf16_supported() and props.major >= 8 else "fp16"
        return DeviceInfo("cuda", props.name, dtype, int(props.total_memory), torch.__version__)
    if kind == "mps":
        return DeviceInfo("mps", "Apple GPU (MPS)", "fp16", None, torch.__version__)
    return DeviceInfo("cpu", _cpu_name(), "bf16" if _cpu_has_bf16() else "fp32", None,
                      torch.__version__)


def _cpu_has_bf16() -> bool:
    # oneDNN answers whether this CPU multiplies bf16 natively (AVX512-BF16, AMX).
    mkldnn = getattr(torch.ops, "mkldnn", None)
    try:
        return bool(torch.backends.mkldnn.is_available() and mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def _cpu_name() -> str:
    # platform.processor() is empty on most Linux systems; /proc/cpuinfo names the part.
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} cores"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
