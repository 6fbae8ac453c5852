"""Hardware specs: accelerators, links and clusters (nodes of accelerators joined by a network).

Units are in the field names: TFLOP/s (1e12), GB (1e9 bytes), GB/s (1e9 bytes/s, per direction),
microseconds. Presets live in presets/accelerators and presets/clusters, each citing its source.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from modelplan.specs.base import Spec

CollectiveName = Literal[
    "all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all",
    "send_recv", "barrier",
]
"""The values of `modelplan.comm.ops.Collective` (specs sit left of comm, so spelled out here)."""

Architecture = Literal["volta", "ampere", "ada", "hopper", "blackwell", "cdna2", "cdna3", "cdna4"]
"""GPU architecture families: NVIDIA compute capability 7.0 (volta), 8.0 (ampere), 8.9 (ada), 9.0
(hopper), 10.x (blackwell) (CUDA C++ Programming Guide, compute capabilities table); AMD CDNA2
(gfx90a), CDNA3 (gfx942), CDNA4 (gfx950) (ROCm docs, GPU hardware specifications)."""


class Accelerator(Spec):
    """One GPU/accelerator: dense peak throughput per dtype, memory and memory bandwidth."""

    name: str
    """Display name, e.g. 'A100-SXM4-80GB'."""
    peak_tflops: dict[str, float]
    """Dense (no sparsity) peak TFLOP/s per dtype: keys among fp32, tf32, bf16, fp16, fp8."""
    memory_gb: float = Field(gt=0)
    """HBM capacity as marketed, in GB (the datasheet's figure; see `memory_total_mib`)."""
    memory_total_mib: float | None = Field(None, gt=0)
    """Device memory the driver reports (NVML, nvidia-smi's "Total", MiB = 2**20 bytes): what a
    training process can fill. Marketed "80 GB" HBM is binary-sized (80 GiB on A100 80GB, 79.65
    GiB on H100 80GB, ~7 % more than 80e9 bytes); None: memory_gb x 1e9."""
    memory_bw_tbps: float = Field(gt=0)
    """HBM bandwidth in TB/s."""
    matmul_efficiency: float = Field(0.8, gt=0, le=1)
    """Best achievable fraction of peak on large GEMMs (measured MAMF / peak)."""
    architecture: Architecture | None = None
    """The part's architecture family, what an engine's per-architecture figures key on
    (`EngineProfile.tensor_rate_by_arch`); None: unknown, no such figure applies."""
    sm_count: int | None = Field(None, gt=0)
    """Streaming multiprocessors (AMD: compute units); what a collective running on some of them
    takes from the GEMMs beside it (`modelplan.comm.tp_overlap`). None: unknown."""
    sustained_clock_fraction: float = Field(1.0, gt=0, le=1)
    """Tensor-core throughput a whole training step keeps relative to the A100 the cost model's
    `sustained_fraction` was fitted on (Narayanan et al. 2021): < 1 where the part's clocks drop
    further under sustained tensor load at its power limit than in the short MAMF measurement.
    1.0 unless fitted (each preset says to what)."""
    matmul_efficiency_fp8: float | None = Field(None, gt=0, le=1)
    """The same for fp8 GEMMs (measured fp8 MAMF / fp8 peak); None: `matmul_efficiency`."""
    attention_efficiency: dict[str, tuple[float, float]] = {}
    """Per fused-attention kernel (fa2, fa3, cudnn: `modelplan.specs.engine.AttentionImpl`), the
    fraction of the 16-bit dense peak its forward and its backward sustain in isolation on long
    sequences (head dim 128); kernels not listed do not run here (FlashAttention-3 needs Hopper)."""
    board_power_w: float | None = Field(None, gt=0)
    """Maximum board power (TDP) in watts, the figure whole-run energy is priced at; None: unknown."""
    power_source: str = ""
    """Where board_power_w comes from (datasheet)."""
    source: str = ""
    """Where the figures come from."""

    @model_validator(mode="after")
    def _check(self) -> "Accelerator":
        for key, value in self.peak_tflops.items():
            if key not in {"fp32", "tf32", "bf16", "fp16", "fp8"}:
                raise ValueError(f"peak_tflops: unknown dtype '{key}'")
            if value <= 0:
                raise ValueError(f"peak_tflops.{key} ({value}) must be > 0")
        for key, (fwd, bwd) in self.attention_efficiency.items():
            if key not in {"fa2", "fa3", "cudnn"}:
                raise ValueError(f"attention_efficiency: unknown kernel '{key}' (fa2, fa3, cudnn)")
            if not (0 < fwd <= 1 and 0 < bwd <= 1):
                raise ValueError(f"attention_efficiency.{key} ({fwd}, {bwd}) must be in (0, 1]")
        return self

    @property
    def memory_capacity_bytes(self) -> float:
        """Bytes a process can allocate on the device (`memory_total_mib`, else memory_gb x 1e9)."""
        if self.memory_total_mib is not None:
            return self.memory_total_mib * 2**20
        return self.memory_gb * 1e9

    def attention_kernel(self, preference: tuple[str, ...]) -> str | None:
        """The first kernel of `preference` this accelerator lists, or None when it lists none."""
        return next((kernel for kernel in preference if kernel in self.attention_efficiency), None)

    def attention_rates(self, preference: tuple[str, ...]) -> tuple[float, float] | None:
        """(forward, backward) efficiency of the first kernel of `preference` this accelerator
        lists, or None when it lists none of them."""
        kernel = self.attention_kernel(preference)
        return None if kernel is None else self.attention_efficiency[kernel]

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
        from modelplan.errors import SpecError

        listed = ", ".join(sorted(self.peak_tflops)) or "none"
        raise SpecError(f"accelerator {self.name} lists no peak_tflops for precision '{precision}' "
                        f"(it lists: {listed}): add peak_tflops.{order[0]} to its spec, or train "
                        "in a precision it lists")


class Link(Spec):
    """A class of link: bandwidth per GPU per direction, achievable fraction, per-hop latency."""

    name: str
    """e.g. 'NVLink3+NVSwitch' or '8x HDR InfiniBand'."""
    bandwidth_gbps: float = Field(gt=0)
    """Nominal unidirectional bandwidth per GPU in GB/s (1e9 bytes/s)."""
    efficiency: float = Field(1.0, gt=0, le=1)
    """Fraction of the nominal bandwidth that collectives achieve (ring busbw / line rate)."""
    latency_us: float = Field(ge=0)
    """Per-message start-up latency alpha in microseconds (one hop of one algorithm step)."""
    fabric: Literal["switch", "mesh"] = "switch"
    """'switch': each GPU reaches any peer at the full bandwidth_gbps (NVSwitch, a NIC).
    'mesh': bandwidth_gbps is the sum of direct links, one to each other GPU of the node (AMD
    xGMI), so g of a node's G GPUs together get (g-1)/(G-1) of it and one peer 1/(G-1)."""
    nvls: bool = False
    """NVLink SHARP: the switch reduces in-network (NCCL's NVLS AllReduce; NVSwitch of Hopper and
    later). Only an intra-node link of fabric 'switch' can have it."""
    nvls_min_ranks: int = Field(2, ge=2)
    """Fewest ranks of a group that NCCL runs NVLS for (5 on H200, 6 on B200: comm_hw.md §1.2)."""
    nvls_efficiency: float = Field(1.0, gt=0, le=1)
    """NCCL's nvlsEfficiency: the fraction of the link's achievable bandwidth an NVLS reduction
    gets (tuning.cc: Hopper 0.85, Blackwell 0.74)."""
    nvls_latency_us: float = Field(0.0, ge=0)
    """Latency of one NVLS call in microseconds (tuning.cc: NVLS NVLink Simple 25 us; NCCL adds no
    base latency to it)."""
    nccl_protocols: tuple[Literal["ll", "ll128", "simple"], ...] = ("ll", "ll128", "simple")
    """NCCL protocols this link carries (AWS EFA without in-order 128-byte delivery: simple only,
    aws/aws-ofi-nccl#76, #850; as NCCL_PROTO restricts them)."""
    nccl_net_latency_us: float = Field(0.0, ge=0)
    """Latency the NCCL net plugin reports for this network (ncclNetProperties.latency), which
    tuning.cc adds to each network hop (twice for Simple): InfiniBand (net_ib) 0; AWS EFA
    (aws-ofi-nccl platform-aws.cpp) 35 us on p5en / p6-b200, 75 us on p4d / p5. The alpha-beta
    formulas (Send/Recv, AllToAll, Barrier across nodes) add it twice to latency_us, as Simple."""
    source: str = ""
    """Where the bandwidth, efficiency and latency come from."""

    @model_validator(mode="after")
    def _check_nvls(self) -> "Link":
        if self.nvls and self.fabric != "switch":
            raise ValueError(f"nvls: in-switch reduction needs fabric 'switch', not '{self.fabric}'")
        return self

    @property
    def effective_bandwidth_Bps(self) -> float:  # noqa: N802 - unit in the name
        """Achievable bytes per second per GPU per direction."""
        return self.bandwidth_gbps * 1e9 * self.efficiency


class CollectiveFit(Spec):
    """A measured alpha-beta fit of one collective (written by `modelplan calibrate`).

    When a cluster carries a fit for an operation and scope, the cost model's `auto` uses it
    instead of its analytic algorithms: time_s = alpha_us*1e-6 + nbytes*busbw_factor/busbw,
    with nccl-tests' message size and busbw factor for the operation. Fits of one operation,
    scope and group size may cover size ranges (`min_bytes`): latency-bound small messages and
    bandwidth-bound large ones rarely sit on one line.
    """

    op: CollectiveName
    """The operation measured, e.g. 'all_reduce'."""
    scope: Literal["intra", "inter"]
    """'intra': groups inside one node; 'inter': groups that span nodes."""
    ranks: int | None = Field(None, ge=2)
    """Group size the fit was measured at; None applies to every group size of this scope."""
    alpha_us: float = Field(ge=0)
    """Fitted start-up time of one call in microseconds."""
    busbw_gbps: float = Field(gt=0)
    """Fitted saturated bus bandwidth in GB/s (nccl-tests convention; 1/beta)."""
    min_bytes: int = Field(0, ge=0)
    """Smallest message (nccl-tests size) the fit covers; a message takes the fit with the largest
    min_bytes <= its size (the smallest one when it is below them all)."""
    source: str = ""
    """Where the measurement comes from (tool, date, message sizes)."""


class Fabric(Spec):
    """The scale-out network above the NICs: how nodes reach each other beyond one switch."""

    kind: Literal["fat_tree", "rail_optimized"] = "fat_tree"
    """'fat_tree': all NICs of a node go to one leaf (top of rack); 'rail_optimized': NIC i of
    every node goes to leaf i (the rail), so GPU i of `leaf_nodes` nodes is one hop from GPU i of
    the others (DGX SuperPOD scalable units). NCCL's rings and trees use NIC i for GPU i's
    channel and PXN moves cross-rail traffic over NVLink first, so collectives stay on the rail."""
    leaf_nodes: int | None = Field(None, gt=0)
    """Nodes (NVLink domains where `Cluster.nvlink_domain_gpus` spans nodes) one leaf joins at the
    full NIC rate (rail_optimized: the nodes of one rail group /
    scalable unit); None: the whole fabric is non-blocking."""
    oversubscription: float = Field(1.0, ge=1)
    """Leaf down-link to up-link bandwidth ratio (1.0: non-blocking, 2.0: 2:1); traffic leaving a
    leaf shares its up-links (`modelplan.comm.fabric`)."""
    source: str = ""
    """Where the topology comes from."""


class Host(Spec):
    """What each node offers beside its accelerators: CPU memory, its bandwidth, PCIe and NVMe."""

    memory_gb: float = Field(gt=0)
    """CPU DRAM per node in GB (1e9 bytes)."""
    memory_bw_gbps: float = Field(gt=0)
    """Peak DRAM bandwidth per node in GB/s (channels x transfer rate x 8 bytes, all sockets)."""
    memory_bw_efficiency: float = Field(0.7, gt=0, le=1)
    """Fraction of the peak a streaming kernel (CPU Adam) sustains (STREAM triad on server CPUs
    reaches 0.6-0.8 of peak; an estimate)."""
    pcie_gbps: float = Field(gt=0)
    """GPU-to-host link per GPU per direction in GB/s (PCIe Gen4 x16 ~31.5, Gen5 x16 ~63)."""
    pcie_efficiency: float = Field(0.8, gt=0, le=1)
    """Fraction of pcie_gbps pinned-memory copies achieve (cudaMemcpy over Gen4 x16: ~25 of 31.5)."""
    gpus_per_pcie_uplink: int = Field(1, gt=0)
    """GPUs behind one PCIe switch uplink to the CPU (DGX: 2), which share its bandwidth when all
    copy at once."""
    nvme_read_gbps: float | None = Field(None, gt=0)
    """Local NVMe read bandwidth per node in GB/s (ZeRO-Infinity offload); None: no NVMe offload."""
    nvme_write_gbps: float | None = Field(None, gt=0)
    """Local NVMe write bandwidth per node in GB/s; None: nvme_read_gbps."""
    nvme_tb: float | None = Field(None, gt=0)
    """Local NVMe capacity per node in TB (1e12 bytes)."""
    source: str = ""
    """Where the figures come from."""


class Cluster(Spec):
    """Nodes of identical accelerators: a fast intra-node link and a slower network between nodes."""

    name: str
    """Display name, e.g. 'dgx-a100'."""
    accelerator: Accelerator
    """The accelerator in every slot."""
    gpus_per_node: int = Field(gt=0)
    """Accelerators per node (one host: what `host` describes and a launcher's processes per node)."""
    nvlink_domain_gpus: int | None = Field(None, gt=0)
    """Accelerators one `intra` switch fabric joins when it spans several nodes (GB200 NVL72: 72 over
    18 trays of 4); None: one node. The comm model and the planner price a domain as their node
    (TP / EP inside it on `intra`, between domains on the NICs), as collective libraries group ranks
    by NVLink domain, not host (NVIDIA MNNVL User Guide; microsoft/mscclpp#798 "ranks per IPC domain")."""
    nodes: int | None = Field(None, gt=0)
    """Nodes available; None means as many as the request needs."""
    intra: Link
    """Link between accelerators of one node."""
    inter: Link
    """Network link between nodes, per accelerator (its NIC share)."""
    call_latency_us: float = Field(0.0, ge=0)
    """Fixed start-up of one collective call in microseconds, paid once per call (NCCL's
    per-algorithm base latency)."""
    fabric: Fabric = Fabric()
    """The scale-out topology (default: non-blocking)."""
    host: Host | None = None
    """CPU memory, PCIe and NVMe per node, for offload; None: not stated (no offload searched)."""
    collective_fits: tuple[CollectiveFit, ...] = ()
    """Measured overrides per collective and scope (from `modelplan calibrate`), else empty."""
    price_per_gpu_hour_usd: float | None = Field(None, gt=0)
    """A list price of renting one of these accelerators for an hour, in US dollars; None: none stated
    (`plan --price-per-gpu-hour` gives one)."""
    price_source: str = ""
    """Where price_per_gpu_hour_usd comes from, with its date (list prices change)."""
    source: str = ""
    """Where the figures come from."""

    @model_validator(mode="after")
    def _check_fits(self) -> "Cluster":
        domain, gpn = self.domain_gpus, self.gpus_per_node
        if domain % gpn:
            raise ValueError(f"nvlink_domain_gpus ({domain}) must be a multiple of gpus_per_node ({gpn})")
        if domain > gpn and self.intra.fabric != "switch":
            raise ValueError(f"nvlink_domain_gpus ({domain}) > gpus_per_node ({gpn}) needs intra.fabric 'switch'")
        if self.nodes is not None and (self.nodes * gpn) % domain:
            raise ValueError(f"nodes ({self.nodes}) x gpus_per_node ({gpn}) must fill whole NVLink domains "
                             f"of nvlink_domain_gpus ({domain})")
        if self.inter.nvls:
            raise ValueError("inter.nvls: NVLS is an in-node NVSwitch capability; set it on intra")
        seen = set()
        for fit in self.collective_fits:
            key = (fit.op, fit.scope, fit.ranks, fit.min_bytes)
            if key in seen:
                raise ValueError(
                    f"collective_fits: two fits for op '{fit.op}', scope '{fit.scope}', ranks {fit.ranks}, "
                    f"min_bytes {fit.min_bytes}"
                )
            seen.add(key)
        return self

    @property
    def domain_gpus(self) -> int:
        """GPUs of one NVLink domain: `nvlink_domain_gpus`, else a node's."""
        return self.nvlink_domain_gpus or self.gpus_per_node

    @property
    def domains(self) -> int | None:
        """NVLink domains available, or None when the node count is open."""
        return None if self.nodes is None else self.nodes * self.gpus_per_node // self.domain_gpus

    @property
    def max_gpus(self) -> int | None:
        """Total accelerators, or None when the node count is open."""
        return None if self.nodes is None else self.nodes * self.gpus_per_node
