"""Accelerator datasheets: memory, bandwidth and dense tensor-core FLOP/s per dtype.

Every rate is the vendor's *dense* figure. Datasheets often print the 2x "with sparsity"
number; that is halved here. Memory capacity: the labels say "80 GB", and the card holds
80 GiB of HBM (five 16 GiB stacks on an H100), so capacity is stored as label x GiB.
PyTorch reports a little less (an H100 shows about 79.1 GiB) because the driver keeps some.
Bandwidth is decimal: 3.35 TB/s = 3.35e12 bytes/s.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import _check
from .units import GiB

DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")


@dataclass(frozen=True)
class GPUSpec:
    """One accelerator's datasheet numbers.

    ``memory_bytes``: device memory in bytes (label x GiB, see module docstring).
    ``hbm_bandwidth_Bps``: peak memory bandwidth in bytes/s.
    ``flops``: dense peak FLOP/s per dtype name (a subset of ``DTYPES``); a dtype the
    part has no tensor-core support for is absent (the T4 has no bf16).
    ``source``: the datasheet the numbers were read from.
    """

    name: str
    memory_bytes: float
    hbm_bandwidth_Bps: float
    flops: dict = field(default_factory=dict)
    source: str = ""

    def __post_init__(self):
        _check.positive("memory_bytes", self.memory_bytes)
        _check.positive("hbm_bandwidth_Bps", self.hbm_bandwidth_Bps)
        _check.instance("flops", self.flops, dict, "a dict of dtype name -> FLOP/s")
        for k, v in self.flops.items():
            _check.choice("flops dtype", k, DTYPES)
            _check.positive(f"flops[{k!r}]", v)

    def peak_flops(self, dtype: str = "bf16") -> float:
        """Dense peak FLOP/s in ``dtype``; ValueError if the part has no such tensor-core rate."""
        if dtype not in self.flops:
            raise ValueError(f"dtype {dtype!r} has no dense rate on {self.name}; "
                             f"available: {', '.join(self.flops)}")
        return self.flops[dtype]


_NV = "https://www.nvidia.com/en-us/data-center/"
_GPUS = {
    "a100-40gb": GPUSpec("a100-40gb", 40 * GiB, 1555e9,
                         {"fp32": 19.5e12, "tf32": 156e12, "fp16": 312e12, "bf16": 312e12},
                         "NVIDIA A100 Tensor Core GPU datasheet (SXM 40GB), " + _NV + "a100/"),
    "a100-80gb": GPUSpec("a100-80gb", 80 * GiB, 2039e9,
                         {"fp32": 19.5e12, "tf32": 156e12, "fp16": 312e12, "bf16": 312e12},
                         "NVIDIA A100 Tensor Core GPU datasheet (SXM 80GB), " + _NV + "a100/"),
    "h100-sxm": GPUSpec("h100-sxm", 80 * GiB, 3.35e12,
                        {"fp32": 67e12, "tf32": 494.5e12, "fp16": 989.5e12, "bf16": 989.5e12,
                         "fp8": 1979e12},
                        "NVIDIA H100 Tensor Core GPU datasheet (SXM), " + _NV + "h100/"),
    "h100-pcie": GPUSpec("h100-pcie", 80 * GiB, 2.0e12,
                         {"fp32": 51e12, "tf32": 378e12, "fp16": 756.5e12, "bf16": 756.5e12,
                          "fp8": 1513e12},
                         "NVIDIA H100 Tensor Core GPU datasheet (PCIe), " + _NV + "h100/"),
    "h200": GPUSpec("h200", 141 * GiB, 4.8e12,
                    {"fp32": 67e12, "tf32": 494.5e12, "fp16": 989.5e12, "bf16": 989.5e12,
                     "fp8": 1979e12},
                    "NVIDIA H200 Tensor Core GPU datasheet (SXM), " + _NV + "h200/"),
    "l4": GPUSpec("l4", 24 * GiB, 300e9,
                  {"fp32": 30.3e12, "tf32": 60e12, "fp16": 121e12, "bf16": 121e12, "fp8": 242.5e12},
                  "NVIDIA L4 Tensor Core GPU datasheet, " + _NV + "l4/"),
    "t4": GPUSpec("t4", 16 * GiB, 320e9, {"fp32": 8.1e12, "fp16": 65e12},
                  "NVIDIA T4 Tensor Core GPU datasheet (no bf16 tensor cores), "
                  + _NV + "tesla-t4/"),
    "l40s": GPUSpec("l40s", 48 * GiB, 864e9,
                    {"fp32": 91.6e12, "tf32": 183e12, "fp16": 362.05e12, "bf16": 362.05e12,
                     "fp8": 733e12},
                    "NVIDIA L40S GPU datasheet, " + _NV + "l40s/"),
    "mi300x": GPUSpec("mi300x", 192 * GiB, 5.3e12,
                      {"fp32": 163.4e12, "tf32": 653.7e12, "fp16": 1307.4e12, "bf16": 1307.4e12,
                       "fp8": 2614.9e12},
                      "AMD Instinct MI300X accelerator datasheet, "
                      "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html"),
    "b200": GPUSpec("b200", 180 * GiB, 8e12,
                    {"fp32": 75e12, "tf32": 1100e12, "fp16": 2250e12, "bf16": 2250e12,
                     "fp8": 4500e12},
                    "NVIDIA HGX B200 datasheet (per GPU: 1/8 of the 8-GPU board), "
                    + _NV + "hgx/"),
    # Cards readers have. GeForce rates are the Ada and Ampere whitepapers' dense tensor
    # figures with FP32 accumulate (what frameworks use); GDDR memory is label x GiB too.
    "rtx-4090": GPUSpec("rtx-4090", 24 * GiB, 1008e9,
                        {"fp32": 82.6e12, "tf32": 82.6e12, "fp16": 165.2e12, "bf16": 165.2e12,
                         "fp8": 330.3e12},
                        "NVIDIA Ada GPU Architecture whitepaper, appendix table (GeForce RTX 4090), "
                        "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/"
                        "nvidia-ada-gpu-architecture.pdf; checked against the same dense/sparse "
                        "figures at https://waredb.com/processor/nvidia-geforce-rtx-4090"),
    "rtx-3090": GPUSpec("rtx-3090", 24 * GiB, 936e9,
                        {"fp32": 35.6e12, "tf32": 35.6e12, "fp16": 71e12, "bf16": 71e12},
                        "NVIDIA Ampere GA102 GPU Architecture whitepaper, table 9 (GeForce RTX 3090), "
                        "https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf"
                        "; 24 GB, 936 GB/s and FP32 35.6 TFLOP/s checked against the spec table at "
                        "https://holynerdvana.blogspot.com/2022/10/nvidia-geforce-rtx-3090-specifications.html "
                        "(its 142 TFLOP/s FP16 is the FP16-accumulate rate; the FP32-accumulate rate used "
                        "here, half of it, was not checked against a published copy)"),
    "a10": GPUSpec("a10", 24 * GiB, 600e9,
                   {"fp32": 31.2e12, "tf32": 62.5e12, "fp16": 125e12, "bf16": 125e12},
                   "NVIDIA A10 Tensor Core GPU datasheet, " + _NV + "products/a10-gpu/; 24 GB, 600 GB/s "
                   "and FP32 31.2 TFLOP/s checked against https://sysrqmts.com/ru/gpus/compare/"
                   "nvidia-a10-pcie-vs-nvidia-quadro-rtx-4000 (72 SMs, 288 tensor cores, 1,695 MHz); "
                   "the tensor rates were not checked against a published copy (they agree with "
                   "288 tensor cores x 256 FLOP/clock x 1.695 GHz = 125 TFLOP/s)"),
    # AWS's variant of the A10 (G5 instances): same memory and bandwidth, a lower tensor
    # rate. NVIDIA publishes no datasheet for it. Memory and bandwidth are in Baseten's text
    # (24 GB GDDR6, 600 GB/s, as the A10); its spec table, the source of the rates, is an
    # image, so the rates were not checked against a published text copy.
    "a10g": GPUSpec("a10g", 24 * GiB, 600e9,
                    {"fp32": 35e12, "tf32": 35e12, "fp16": 70e12, "bf16": 70e12},
                    "Amazon EC2 G5 instances (NVIDIA A10G), https://aws.amazon.com/ec2/instance-types/g5/; "
                    "Baseten, NVIDIA A10 vs A10G for ML model inference, "
                    "https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/ "
                    "(memory and bandwidth checked; FLOP/s rates not checked against a published copy)"),
    "l40": GPUSpec("l40", 48 * GiB, 864e9,
                   {"fp32": 90.5e12, "tf32": 90.5e12, "fp16": 181.05e12, "bf16": 181.05e12,
                    "fp8": 362e12},
                   "NVIDIA L40 GPU datasheet, " + _NV + "l40/; checked against the datasheet's table "
                   "as a reseller reprints it, https://www.mullet.se/product.html?product_id=355414"),
    # The export-compliant Hopper: H100-class memory system, about 15% of its arithmetic.
    # NVIDIA publishes no datasheet; the figures are the HGX H20 spec table as reported.
    "h20": GPUSpec("h20", 96 * GiB, 4.0e12,
                   {"fp32": 44e12, "tf32": 74e12, "fp16": 148e12, "bf16": 148e12, "fp8": 296e12},
                   "HGX H20 specifications as reported by Tom's Hardware (96 GB HBM3, 4.0 TB/s; "
                   "FP16/BF16 148, FP8 296, TF32 74 TFLOP/s tensor, dense: 15% of the H100's), "
                   "https://www.tomshardware.com/pc-components/gpus/new-nvidia-ai-gpus-designed-to-get-"
                   "around-us-export-bans-come-to-china-h20-l20-and-l2-to-fill-void-left-by-restricted-models"
                   "; FP32 44 TFLOP/s not in that table (press reports): not checked against a published copy"),
    "mi325x": GPUSpec("mi325x", 256 * GiB, 6.0e12,
                      {"fp32": 163.4e12, "tf32": 653.7e12, "fp16": 1307.4e12, "bf16": 1307.4e12,
                       "fp8": 2614.9e12},
                      "AMD Instinct MI325X accelerator datasheet, "
                      "https://www.amd.com/en/products/accelerators/instinct/mi300/mi325x.html; "
                      "checked against the figures reprinted at https://awesomeagents.ai/hardware/amd-mi325x "
                      "(FP8 2,614.9 dense, 5,229.8 sparse)"),
}


def list_gpus() -> list[str]:
    """Names of the preset accelerators, sorted."""
    return sorted(_GPUS)


def get_gpu(name: str) -> GPUSpec:
    """The preset :class:`GPUSpec` called ``name`` (case-insensitive).

    Raises TypeError if ``name`` is not a string, KeyError listing the known names if unknown.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    key = name.strip().lower()
    if key not in _GPUS:
        raise KeyError(f"unknown GPU {name!r}; known GPUs: {', '.join(list_gpus())}")
    return _GPUS[key]


def as_gpu(gpu: GPUSpec | str) -> GPUSpec:
    """``gpu`` itself if it is a :class:`GPUSpec`, the preset of that name if it is a string.

    Raises TypeError naming ``gpu`` for anything else, KeyError for an unknown name.
    """
    if isinstance(gpu, str):
        return get_gpu(gpu)
    return _check.instance("gpu", gpu, GPUSpec, "a GPUSpec or a preset name")


def ridge_point(gpu: GPUSpec | str, dtype: str = "bf16") -> float:
    """The roofline's ridge point in FLOP/byte: dense peak FLOP/s of ``dtype`` / bandwidth.

    Below it a kernel is memory-bound, above it compute-bound. ``gpu`` is a GPUSpec or a
    preset name. Example: H100 SXM in bf16, 989.5e12 / 3.35e12 = 295 FLOP/byte.
    Raises ValueError if the part has no dense rate for ``dtype``.
    """
    gpu = as_gpu(gpu)
    return gpu.peak_flops(dtype) / gpu.hbm_bandwidth_Bps
