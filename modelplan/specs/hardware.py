"""Hardware specs: accelerators, links and clusters (nodes of accelerators joined by a network).

Units are in the field names: TFLOP/s (1e12), GB (1e9 bytes), GB/s (1e9 bytes/s, per direction),
microseconds. Presets live in presets/accelerators and presets/clusters, each citing its source.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from modelplan.specs.base import Spec


class Accelerator(Spec):
    """One GPU/accelerator: dense peak throughput per dtype, memory and memory bandwidth."""

    name: str
    """Display name, e.g. 'A100-SXM4-80GB'."""
    peak_tflops: dict[str, float]
    """Dense (no sparsity) peak TFLOP/s per dtype: keys among fp32, tf32, bf16, fp16, fp8."""
    memory_gb: float = Field(gt=0)
    """HBM capacity in GB (1e9 bytes)."""
    memory_bw_tbps: float = Field(gt=0)
    """HBM bandwidth in TB/s."""
    matmul_efficiency: float = Field(0.8, gt=0, le=1)
    """Best achievable fraction of peak on large GEMMs (measured MAMF / peak)."""
    source: str = ""
    """Where the figures come from."""

    @model_validator(mode="after")
    def _check(self) -> "Accelerator":
        for key, value in self.peak_tflops.items():
            if key not in {"fp32", "tf32", "bf16", "fp16", "fp8"}:
                raise ValueError(f"peak_tflops: unknown dtype '{key}'")
            if value <= 0:
                raise ValueError(f"peak_tflops.{key} ({value}) must be > 0")
        return self

    def peak_flops(self, precision: str) -> float:
        """Dense peak FLOP/s for a training precision (fp32 uses tf32 tensor cores if listed)."""
        order = {
            "fp32": ["tf32", "fp32"],
            "bf16": ["bf16", "fp16"],
            "fp16": ["fp16", "bf16"],
            "fp8": ["fp8", "bf16", "fp16"],
        }[precision]
        for key in order:
            if key in self.peak_tflops:
                return self.peak_tflops[key] * 1e12
        raise ValueError(f"accelerator {self.name} lists no peak for precision '{precision}'")


class Link(Spec):
    """A class of link: bandwidth per GPU per direction, achievable fraction, per-hop latency."""

    name: str
    """e.g. 'NVLink3+NVSwitch' or '8x HDR InfiniBand'."""
    bandwidth_gbps: float = Field(gt=0)
    """Nominal unidirectional bandwidth per GPU in GB/s (1e9 bytes/s)."""
    efficiency: float = Field(1.0, gt=0, le=1)
    """Fraction of the nominal bandwidth that collectives achieve (ring busbw / line rate)."""
    latency_us: float = Field(ge=0)
    """Per-message start-up latency alpha in microseconds."""

    @property
    def effective_bandwidth_Bps(self) -> float:  # noqa: N802 - unit in the name
        """Achievable bytes per second per GPU per direction."""
        return self.bandwidth_gbps * 1e9 * self.efficiency


class Cluster(Spec):
    """Nodes of identical accelerators: a fast intra-node link and a slower network between nodes."""

    name: str
    """Display name, e.g. 'dgx-a100'."""
    accelerator: Accelerator
    """The accelerator in every slot."""
    gpus_per_node: int = Field(gt=0)
    """Accelerators per node (the NVLink domain)."""
    nodes: int | None = Field(None, gt=0)
    """Nodes available; None means as many as the request needs."""
    intra: Link
    """Link between accelerators of one node."""
    inter: Link
    """Network link between nodes, per accelerator (its NIC share)."""
    source: str = ""
    """Where the figures come from."""

    @property
    def max_gpus(self) -> int | None:
        """Total accelerators, or None when the node count is open."""
        return None if self.nodes is None else self.nodes * self.gpus_per_node
