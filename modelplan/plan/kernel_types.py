"""The two kinds of kernel the planner prices: a GEMM with its shape (its efficiency depends on the
shape: `compute.Roofline`) and a memory-bound element-wise pass with the bytes it moves."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Gemm:
    """out (m, n) = a (m, k) @ b (k, n), `batch` times (batched matmul for attention)."""

    name: str
    m: int
    n: int
    k: int
    batch: int = 1

    @property
    def flops(self) -> int:
        """2 FLOPs per multiply-add."""
        return 2 * self.m * self.n * self.k * self.batch

    def bytes_moved(self, dtype_bytes: int) -> int:
        """Read both operands, write the output once (the roofline's memory traffic)."""
        return dtype_bytes * (self.m * self.k + self.k * self.n + self.m * self.n) * self.batch

    def backward(self) -> tuple["Gemm", "Gemm"]:
        """Input gradient (m, k) = dy (m, n) @ b.T and weight gradient (k, n) = a.T @ dy."""
        return (
            Gemm(self.name + "/dgrad", self.m, self.k, self.n, self.batch),
            Gemm(self.name + "/wgrad", self.k, self.n, self.m, self.batch),
        )


@dataclass(frozen=True)
class Elementwise:
    """A memory-bound kernel over `elements` values with its HBM bytes per value, fwd and bwd."""

    name: str
    elements: int
    fwd_bytes_per_element: float
    bwd_bytes_per_element: float
    kernels: tuple[int, int] = (1, 1)
    """Kernels the op launches in forward and in backward (an eager composite launches several)."""

    @property
    def fwd_bytes(self) -> float:
        """HBM bytes of the forward kernel."""
        return self.elements * self.fwd_bytes_per_element

    @property
    def bwd_bytes(self) -> float:
        """HBM bytes of the backward kernel(s)."""
        return self.elements * self.bwd_bytes_per_element
