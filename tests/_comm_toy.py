"""A cluster with round numbers, so expected times can be worked by hand in the tests."""

from modelplan.specs.hardware import Accelerator, Cluster, Link

ALPHA_I = 1e-6  # 1 us per NVLink-class hop
B_I = 100e9  # 100 GB/s per GPU inside a node
ALPHA_E = 10e-6  # 10 us per network hop
B_E = 10e9  # 10 GB/s per GPU NIC


def toy_cluster(gpus_per_node: int = 4, nodes: int | None = None, **changes) -> Cluster:
    """4 GPUs per node, intra 100 GB/s and 1 us, NIC 10 GB/s and 10 us, no call latency."""
    acc = Accelerator(name="toy", peak_tflops={"bf16": 100.0}, memory_gb=80, memory_bw_tbps=2.0)
    fields = dict(
        name="toy",
        accelerator=acc,
        gpus_per_node=gpus_per_node,
        nodes=nodes,
        intra=Link(name="toylink", bandwidth_gbps=100.0, efficiency=1.0, latency_us=1.0),
        inter=Link(name="toynet", bandwidth_gbps=10.0, efficiency=1.0, latency_us=10.0),
        call_latency_us=0.0,
    )
    fields.update(changes)
    return Cluster(**fields)
