"""Links between the GPUs of one server, and the time of an all-reduce over them.

Tensor parallelism ends every attention block and every MLP block with an all-reduce of
the activations across the devices of a replica. Its cost follows the alpha-beta model:
a fixed latency per call (launch, synchronisation, the first hop) plus the bytes each
device sends over its link bandwidth. A ring all-reduce of a message of ``m`` bytes over
``n`` devices sends ``2 (n - 1) / n * m`` bytes from each device (a reduce-scatter, then
an all-gather, each moving ``(n - 1) / n`` of the message), which is the "bus bandwidth"
factor of NCCL's own benchmark (nccl-tests, doc/PERFORMANCE.md).

Bandwidths are the datasheets' figures, per GPU and per direction: a datasheet that prints
a bidirectional total ("NVLink 900 GB/s") is halved here, because a ring sends and
receives at once. Real collectives reach less than the line rate: NCCL's maintainers put
the protocol overhead on NVLink at about 20% (NVIDIA/nccl-tests issue #212: 370 of
450 GB/s on an H100). Latencies are not datasheet figures; each is a published
small-message measurement, cited with it.

The link of a preset is the fabric that connects a whole tensor-parallel group of up to
8 devices: NVLink (through NVSwitch) on SXM boards, Infinity Fabric on AMD's, PCIe where
there is no such fabric (a two-card NVLink bridge, as on the H100 PCIe or the RTX 3090,
joins only pairs and is noted, not modelled).

Each preset also has a *host link*, :func:`get_host_link`: the PCIe link between the GPU and
its server's memory, which KV blocks cross when they are swapped out of the GPU and back
(:func:`servelib.sim.swap_s_per_token`).
"""
from __future__ import annotations

from dataclasses import dataclass

from . import _check

#: Latency of one small-message all-reduce over NVLink/NVSwitch (seconds): published, an
#: H100 node with vLLM's all-reduce at TP 2 to 8, messages of 512 B to 32 KiB, 8.5-11.8 us
#: (sgl-project/sglang pull request #2904, without CUDA graphs).
NVLINK_LATENCY_S = 9e-6
NVLINK_LATENCY_SOURCE = ("published: 8.5-11.8 us for 512 B-32 KiB on 2-8 H100s, vLLM's all-reduce "
                         "(https://github.com/sgl-project/sglang/pull/2904)")
#: Latency of one small-message all-reduce over PCIe (seconds): published, NCCL on 4 GPUs
#: behind a PCIe switch, 4-16 KiB inside a CUDA graph, 19-22 us
#: (haohervchb/sglang-V100 pull request #2).
PCIE_LATENCY_S = 20e-6
PCIE_LATENCY_SOURCE = ("published: 19-22 us for 4-16 KiB on 4 GPUs behind a PCIe switch, NCCL "
                       "(https://github.com/haohervchb/sglang-V100/pull/2)")


@dataclass(frozen=True)
class Link:
    """The link a GPU preset's tensor-parallel group communicates over.

    ``gpu``: the preset name (:func:`servelib.hardware.get_gpu`). ``kind``: 'nvlink',
    'infinity-fabric' or 'pcie'. ``bandwidth_Bps``: per GPU, per direction, bytes/s (the
    datasheet's figure, halved where it is a bidirectional total). ``latency_s``: seconds
    per all-reduce call, with ``latency_source``. ``source``: the datasheet and what it
    says. ``note``: what the model leaves out.
    """

    gpu: str
    kind: str
    bandwidth_Bps: float
    latency_s: float
    source: str
    latency_source: str
    note: str = ""

    def __post_init__(self):
        _check.choice("kind", self.kind, ("nvlink", "infinity-fabric", "pcie"))
        _check.positive("bandwidth_Bps", self.bandwidth_Bps)
        _check.positive("latency_s", self.latency_s)


_NV = "https://www.nvidia.com/en-us/data-center/"
_GEFORCE = "https://www.nvidia.com/en-us/geforce/graphics-cards/"
_AMD = "https://www.amd.com/en/products/accelerators/instinct/"


def _nvlink(gpu, total_GBps, source, note=""):
    return Link(gpu, "nvlink", total_GBps / 2 * 1e9, NVLINK_LATENCY_S, source, NVLINK_LATENCY_SOURCE, note)


def _pcie(gpu, total_GBps, source, note=""):
    return Link(gpu, "pcie", total_GBps / 2 * 1e9, PCIE_LATENCY_S, source, PCIE_LATENCY_SOURCE, note)


def _fabric(gpu, source):
    # AMD prints 128 GB/s per Infinity Fabric link (both directions) and 7 links per GPU.
    return Link(gpu, "infinity-fabric", 7 * 128 / 2 * 1e9, NVLINK_LATENCY_S, source,
                NVLINK_LATENCY_SOURCE.replace("published:", "published for NVLink, assumed here:"),
                "7 links x 128 GB/s (bidirectional) to the other seven GPUs of the board")


_LINKS = {link.gpu: link for link in (
    _nvlink("a100-40gb", 600, "NVIDIA A100 datasheet (SXM): NVLink 600 GB/s, " + _NV + "a100/"),
    _nvlink("a100-80gb", 600, "NVIDIA A100 datasheet (SXM): NVLink 600 GB/s, " + _NV + "a100/"),
    _nvlink("h100-sxm", 900, "NVIDIA H100 datasheet (SXM): NVLink 900 GB/s, " + _NV + "h100/"),
    _pcie("h100-pcie", 128, "NVIDIA H100 datasheet (PCIe): PCIe Gen5 128 GB/s, " + _NV + "h100/",
          "an NVLink bridge (600 GB/s) joins pairs of cards only"),
    _nvlink("h200", 900, "NVIDIA H200 datasheet (SXM): NVLink 900 GB/s, " + _NV + "h200/"),
    _nvlink("h20", 900, "NVIDIA HGX H20 specifications as published by NVIDIA's partners: "
            "NVLink 900 GB/s, PCIe Gen5 128 GB/s"),
    _nvlink("b200", 1800, "NVIDIA HGX B200 datasheet: NVLink 1.8 TB/s per GPU, " + _NV + "hgx/"),
    _pcie("l4", 64, "NVIDIA L4 datasheet: PCIe Gen4 x16 64 GB/s, no NVLink, " + _NV + "l4/"),
    _pcie("t4", 32, "NVIDIA T4 datasheet: PCIe Gen3 x16, 32 GB/s interconnect, " + _NV + "tesla-t4/"),
    _pcie("l40s", 64, "NVIDIA L40S datasheet: PCIe Gen4 x16 64 GB/s bidirectional, no NVLink, "
          + _NV + "l40s/"),
    _pcie("l40", 64, "NVIDIA L40 datasheet: PCIe Gen4 x16 64 GB/s bidirectional, no NVLink, "
          + _NV + "l40/"),
    _pcie("a10", 64, "NVIDIA A10 datasheet: PCIe Gen4 64 GB/s, no NVLink, " + _NV + "products/a10-gpu/"),
    _pcie("a10g", 64, "AWS EC2 G5 (NVIDIA A10G): PCIe Gen4 x16 like the A10, no NVLink, "
          "https://aws.amazon.com/ec2/instance-types/g5/"),
    _pcie("rtx-4090", 64, "NVIDIA GeForce RTX 4090 specifications: PCIe Gen4 x16, no NVLink, "
          + _GEFORCE + "40-series/rtx-4090/"),
    _pcie("rtx-3090", 64, "NVIDIA GeForce RTX 3090 specifications: PCIe Gen4 x16, "
          + _GEFORCE + "30-series/rtx-3090-3090ti/",
          "an NVLink bridge (112.5 GB/s) joins pairs of cards only"),
    _fabric("mi300x", "AMD Instinct MI300X datasheet: 7 Infinity Fabric links, 128 GB/s each, "
            + _AMD + "mi300/mi300x.html"),
    _fabric("mi325x", "AMD Instinct MI325X datasheet: 7 Infinity Fabric links, 128 GB/s each, "
            + _AMD + "mi300/mi325x.html"),
)}



def _preset_name(gpu) -> str:
    from .hardware import GPUSpec
    if isinstance(gpu, GPUSpec):
        return gpu.name
    if isinstance(gpu, str):
        return gpu.strip().lower()
    raise TypeError(f"gpu must be a GPUSpec or a preset name, got {type(gpu).__name__}")

def list_links() -> list[str]:
    """GPU preset names that have a link entry, sorted."""
    return sorted(_LINKS)


def get_link(gpu) -> Link:
    """The :class:`Link` of a GPU preset (a name or a :class:`~servelib.hardware.GPUSpec`).

    Raises TypeError for another type, KeyError listing the known names for a GPU that
    has no entry (a custom GPUSpec: pass the link's figures to the function instead).
    """
    name = _preset_name(gpu)
    if name not in _LINKS:
        raise KeyError(f"no link entry for GPU {name!r}; known: {', '.join(list_links())}")
    return _LINKS[name]



@dataclass(frozen=True)
class HostLink:
    """The link between a GPU preset and its host's memory: its PCIe link.

    ``gpu``: the preset name. ``generation``: the PCIe generation and width, e.g. 'PCIe Gen5
    x16'. ``bandwidth_Bps``: bytes/s in one direction (the datasheet prints the total of both
    directions, halved here: a swap copies one way at a time). ``source``: the datasheet and
    what it says. Copies from pinned host memory reach somewhat less than this line rate.
    """

    gpu: str
    generation: str
    bandwidth_Bps: float
    source: str

    def __post_init__(self):
        _check.positive("bandwidth_Bps", self.bandwidth_Bps)


def _host(gpu, generation, total_GBps, source):
    return HostLink(gpu, generation, total_GBps / 2 * 1e9, source)


_GEN3, _GEN4, _GEN5 = "PCIe Gen3 x16", "PCIe Gen4 x16", "PCIe Gen5 x16"
# The B200 has no entry: its datasheets give NVLink's figure but not its host link's.
_HOST_LINKS = {h.gpu: h for h in (
    _host("a100-40gb", _GEN4, 64, "NVIDIA A100 datasheet: PCIe Gen4 64 GB/s, " + _NV + "a100/"),
    _host("a100-80gb", _GEN4, 64, "NVIDIA A100 datasheet: PCIe Gen4 64 GB/s, " + _NV + "a100/"),
    _host("h100-sxm", _GEN5, 128, "NVIDIA H100 datasheet (SXM): PCIe Gen5 128 GB/s, " + _NV + "h100/"),
    _host("h100-pcie", _GEN5, 128, "NVIDIA H100 datasheet (PCIe): PCIe Gen5 128 GB/s, " + _NV + "h100/"),
    _host("h200", _GEN5, 128, "NVIDIA H200 datasheet: PCIe Gen5 128 GB/s, " + _NV + "h200/"),
    _host("h20", _GEN5, 128, "NVIDIA HGX H20 specifications as published by NVIDIA's partners: "
          "PCIe Gen5 128 GB/s"),
    _host("l4", _GEN4, 64, "NVIDIA L4 datasheet: PCIe Gen4 x16 64 GB/s, " + _NV + "l4/"),
    _host("t4", _GEN3, 32, "NVIDIA T4 datasheet: PCIe Gen3 x16, 32 GB/s interconnect, " + _NV + "tesla-t4/"),
    _host("l40s", _GEN4, 64, "NVIDIA L40S datasheet: PCIe Gen4 x16 64 GB/s bidirectional, " + _NV + "l40s/"),
    _host("l40", _GEN4, 64, "NVIDIA L40 datasheet: PCIe Gen4 x16 64 GB/s bidirectional, " + _NV + "l40/"),
    _host("a10", _GEN4, 64, "NVIDIA A10 datasheet: PCIe Gen4 64 GB/s, " + _NV + "products/a10-gpu/"),
    _host("a10g", _GEN4, 64, "AWS EC2 G5 (NVIDIA A10G): PCIe Gen4 x16 like the A10 (64 GB/s), "
          "https://aws.amazon.com/ec2/instance-types/g5/"),
    _host("rtx-4090", _GEN4, 64, "NVIDIA GeForce RTX 4090 specifications: PCIe Gen4 x16 (64 GB/s both "
          "ways at 16 GT/s a lane), " + _GEFORCE + "40-series/rtx-4090/"),
    _host("rtx-3090", _GEN4, 64, "NVIDIA GeForce RTX 3090 specifications: PCIe Gen4 x16 (64 GB/s both "
          "ways at 16 GT/s a lane), " + _GEFORCE + "30-series/rtx-3090-3090ti/"),
    _host("mi300x", _GEN5, 128, "AMD Instinct MI300X datasheet: PCIe Gen5 x16 (128 GB/s both ways at "
          "32 GT/s a lane), " + _AMD + "mi300/mi300x.html"),
    _host("mi325x", _GEN5, 128, "AMD Instinct MI325X datasheet: PCIe Gen5 x16 (128 GB/s both ways at "
          "32 GT/s a lane), " + _AMD + "mi300/mi325x.html"),
)}


def get_host_link(gpu) -> HostLink:
    """The :class:`HostLink` of a GPU preset (a name or a :class:`~servelib.hardware.GPUSpec`).

    Raises TypeError for another type, KeyError listing the known names for a GPU that
    has no entry (a custom GPUSpec, or the B200: pass the link's bandwidth instead).
    """
    name = _preset_name(gpu)
    if name not in _HOST_LINKS:
        raise KeyError(f"no host link entry for GPU {name!r}; known: {', '.join(sorted(_HOST_LINKS))}")
    return _HOST_LINKS[name]

def ring_allreduce_factor(n_devices: int) -> float:
    """Share of a message each device sends in a ring all-reduce: ``2 (n - 1) / n`` (0 for n = 1)."""
    n = _check.positive_int("n_devices", n_devices)
    return 2.0 * (n - 1) / n


def allreduce_time_s(message_bytes: float, n_devices: int, bandwidth_Bps: float, latency_s: float) -> float:
    """Alpha-beta time of one ring all-reduce, in seconds: ``latency + 2(n-1)/n * bytes / bandwidth``.

    ``message_bytes``: the tensor every device holds and all must end up summing.
    ``bandwidth_Bps``: per device, per direction. One device needs no all-reduce: 0.
    Raises ValueError for a negative size or a non-positive device count, bandwidth or
    latency.
    """
    m = _check.non_negative("message_bytes", message_bytes)
    n = _check.positive_int("n_devices", n_devices)
    bw = _check.positive("bandwidth_Bps", bandwidth_Bps)
    lat = _check.positive("latency_s", latency_s)
    if n == 1:
        return 0.0
    return lat + ring_allreduce_factor(n) * m / bw


def fit_allreduce(message_bytes, times_s, n_devices: int) -> tuple[float, float]:
    """Least-squares alpha-beta fit of measured all-reduce times: ``(latency_s, bandwidth_Bps)``.

    Fits ``t = latency + 2(n-1)/n * m / bandwidth`` to the pairs ``(message_bytes[i],
    times_s[i])``. Needs at least two distinct sizes and ``n_devices >= 2``; raises
    ValueError otherwise, or if the fitted slope is not positive (times that do not grow
    with size, as on a machine too noisy to tell). A negative fitted intercept is clipped
    to 0.
    """
    import numpy as np
    n = _check.positive_int("n_devices", n_devices)
    if n < 2:
        raise ValueError(f"n_devices must be >= 2 to fit an all-reduce, got {n}")
    m = np.asarray([_check.non_negative("message_bytes", x) for x in message_bytes], dtype=float)
    t = np.asarray([_check.positive("times_s", x) for x in times_s], dtype=float)
    if m.shape != t.shape or len(set(m.tolist())) < 2:
        raise ValueError("message_bytes and times_s must pair up, with at least two distinct sizes")
    slope, intercept = np.polyfit(ring_allreduce_factor(n) * m, t, 1)
    if slope <= 0:
        raise ValueError("the fitted time does not grow with the message size; measure larger sizes")
    return max(0.0, float(intercept)), float(1.0 / slope)
