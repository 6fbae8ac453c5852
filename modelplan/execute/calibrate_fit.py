"""Alpha-beta fits of measured collectives, and the cluster profile TOML they are written to.

Model of one call of a collective on p ranks, for the algorithm the communicator runs
(`collectives.py`): time_s = steps * alpha_s + volume_factor * size_bytes * beta, where steps are
the rounds on the critical path and volume_factor * size_bytes the bytes the busiest rank sends
(Hockney's alpha-beta model; size_bytes in the nccl-tests sense, see `calibrate.py`). alpha and
beta are fitted per collective to minimise the largest relative error over the measured points
(a Chebyshev fit: each row divided by its measured time, so 1 KiB and 16 MiB points weigh the
same, and the fit's `max_rel_err` is the best any such line achieves on them).

One line rarely covers both regimes: small messages pay start-up, protocol switches and cache
effects that large ones do not. So sizes below `split_bytes` (default 1 MiB) and sizes from it
up are fitted separately, and each fit says from which size it applies (`min_bytes`); the
cluster profile and the cost model (`Cluster.collective_fits`) use the same ranges.
"""

from __future__ import annotations

from itertools import combinations
from typing import Literal, NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict

from modelplan.comm.bandwidth import busbw_factor
from modelplan.comm.ops import Collective
from modelplan.errors import ModelplanError
from modelplan.execute.calibrate import Measurement


class AlgorithmFactors(NamedTuple):
    """Rounds and per-rank send volume of one algorithm, and nccl-tests' busbw factor."""

    algorithm: str
    steps: int
    volume_factor: float
    busbw_factor: float


def algorithm_factors(op: Collective, p: int) -> AlgorithmFactors:
    """Factors of the algorithm `collectives.py` runs for `op` on p ranks."""
    lg = (p - 1).bit_length()  # ceil(log2 p)
    ring = (p - 1) / p
    if op is Collective.ALL_REDUCE:  # ring RS + AG: 2(p-1) rounds of n/p (Patarasuk & Yuan 2009)
        return AlgorithmFactors("ring", 2 * (p - 1), 2 * ring, 2 * ring)  # busbw 2(p-1)/p
    if op in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER):  # p-1 rounds of n/p
        return AlgorithmFactors("ring", p - 1, ring, ring)  # busbw (p-1)/p, nccl-tests
    if op in (Collective.BROADCAST, Collective.REDUCE):  # binomial tree: lg rounds of all n
        return AlgorithmFactors("binomial", lg, float(lg), 1.0)  # busbw factor 1, nccl-tests
    if op is Collective.ALL_TO_ALL:  # pairwise: p-1 rounds of n/p (Thakur et al. 2005)
        return AlgorithmFactors("pairwise", p - 1, ring, ring)  # busbw (p-1)/p, nccl-tests
    if op is Collective.SEND_RECV:  # one message each way at once
        return AlgorithmFactors("direct", 1, 1.0, 1.0)
    if op is Collective.BARRIER:  # dissemination: lg rounds, no payload (Hensgen et al. 1988)
        return AlgorithmFactors("dissemination", lg, 0.0, 0.0)
    raise ModelplanError(f"no calibration model for {op}")


def per_call_factors(op: Collective, p: int) -> AlgorithmFactors:
    """nccl-tests' own form for a library whose algorithm is not known (NCCL picks ring, tree,
    NVLS, ... per size): one alpha per call and the busbw factor as the volume, so that
    time = alpha + size * busbw_factor / busbw (nccl-tests doc/PERFORMANCE.md)."""
    factor = busbw_factor(op, p)
    if not factor:
        raise ModelplanError(f"{op}: nccl-tests reports no bus bandwidth for it: nothing to fit")
    return AlgorithmFactors("nccl", 1, factor, factor)


FACTORS = {"rounds": algorithm_factors, "per_call": per_call_factors}
"""How a fit's steps and volume are read: per round of the communicator's algorithm
(modelplan's MPI / simulated ranks), or per call (nccl-tests output of NCCL)."""


def predict_s(factors: AlgorithmFactors, size_bytes: int, alpha_s: float,
              bandwidth_Bps: float | None) -> float:  # noqa: N803 - unit in the name
    """Hockney alpha-beta time of one call: steps*alpha + volume*size/bandwidth."""
    volume_s = 0.0 if not bandwidth_Bps else factors.volume_factor * size_bytes / bandwidth_Bps
    return factors.steps * alpha_s + volume_s


class CollectiveFit(BaseModel):
    """The fitted alpha and bandwidth of one collective at one group size."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    op: Collective
    algorithm: str
    ranks: int
    steps: int
    """Rounds per call (the alpha multiplier)."""
    volume_factor: float
    """Bytes the busiest rank sends per byte of nccl-tests size (the beta multiplier)."""
    busbw_factor: float
    """nccl-tests busbw / algbw factor for the operation."""
    alpha_us: float
    """Fitted start-up per round, microseconds."""
    bandwidth_gbps: float | None
    """Fitted 1/beta in GB/s (1e9 bytes/s) per rank and direction; None without payload."""
    points: int
    max_rel_err: float
    min_bytes: int = 0
    """Smallest nccl-tests size this fit covers (the sizes below belong to the previous fit)."""
    """Largest |fit - measured| / measured over the fitted points."""

    @property
    def factors(self) -> AlgorithmFactors:
        return AlgorithmFactors(self.algorithm, self.steps, self.volume_factor, self.busbw_factor)

    @property
    def call_alpha_us(self) -> float:
        """Start-up of one call: steps * alpha_us."""
        return self.steps * self.alpha_us

    @property
    def busbw_gbps(self) -> float | None:
        """The saturated nccl-tests busbw the fit implies: bandwidth * busbw / volume factor."""
        if self.bandwidth_gbps is None or not self.volume_factor:
            return None
        return self.bandwidth_gbps * self.busbw_factor / self.volume_factor

    def predict_s(self, size_bytes: int) -> float:
        """Fitted time of one call at an nccl-tests size."""
        bw = None if self.bandwidth_gbps is None else self.bandwidth_gbps * 1e9
        return predict_s(self.factors, size_bytes, self.alpha_us * 1e-6, bw)


def minimax_fit(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """alpha, beta >= 0 minimising max_i |a_i*alpha + b_i*beta - 1| (a Chebyshev fit; a_i > 0).

    A linear program in (alpha, beta, e): minimise e with -e <= a_i*alpha + b_i*beta - 1 <= e.
    Its optimum is a vertex where three of the constraints (or alpha = 0, beta = 0) hold with
    equality, so every such triple is solved and the best feasible one kept (a handful of points
    per fit: a few thousand 3x3 systems at most).
    """
    if not b.any():  # latency only: equal errors at the two extremes
        return 2.0 / float(a.min() + a.max()), 0.0
    sa, sb = float(a.max()), float(b.max())
    A, B = a / sa, b / sb  # unknowns alpha*sa, beta*sb, both of order 1
    ones = np.ones_like(A)
    rows = np.concatenate([
        np.stack([A, B, -ones, ones], axis=1),  # residual = +e
        np.stack([A, B, ones, ones], axis=1),  # residual = -e
        np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]),  # alpha = 0, beta = 0
    ])
    triples = np.array(list(combinations(range(len(rows)), 3)))
    mats, rhs = rows[triples, :3], rows[triples, 3]
    solvable = np.abs(np.linalg.det(mats)) > 1e-12
    x, y, _ = np.linalg.solve(mats[solvable], rhs[solvable][..., None])[..., 0].T
    x, y = np.maximum(x, 0.0), np.maximum(y, 0.0)
    worst = np.max(np.abs(A[None, :] * x[:, None] + B[None, :] * y[:, None] - 1.0), axis=1)
    k = int(np.argmin(worst))
    return float(x[k]) / sa, float(y[k]) / sb


def fit_collective(op: Collective, p: int, points: list[Measurement], min_bytes: int = 0,
                   form: Literal["rounds", "per_call"] = "rounds") -> CollectiveFit:
    """time = steps*alpha + volume*size*beta (alpha, beta >= 0) with the smallest largest
    relative error over the points: `max_rel_err` is then the best any such line achieves."""
    f = FACTORS[form](op, p)
    if not points:
        raise ModelplanError(f"{op}: no measurements to fit")
    t = np.array([m.time_s for m in points])
    a = np.full_like(t, float(f.steps)) / t  # rows divided by the measured time
    b = np.array([f.volume_factor * m.size_bytes for m in points]) / t
    if not a.any():
        raise ModelplanError(f"{op} on {p} rank(s) moves nothing: nothing to fit")
    alpha, beta = minimax_fit(a, b)
    return CollectiveFit(op=op, algorithm=f.algorithm, ranks=p, steps=f.steps,
                         volume_factor=f.volume_factor, busbw_factor=f.busbw_factor,
                         alpha_us=alpha * 1e6, bandwidth_gbps=(1 / beta / 1e9) if beta else None,
                         points=len(points), max_rel_err=float(np.max(np.abs(a * alpha + b * beta - 1.0))),
                         min_bytes=min_bytes)


class Calibration(BaseModel):
    """Everything `modelplan calibrate` measured and fitted."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    world_size: int
    backend: str
    library: str
    scope: Literal["intra", "inter"]
    """'intra' when every rank ran on one host."""
    source: str
    measurements: tuple[Measurement, ...]
    fits: tuple[CollectiveFit, ...]
    link_alpha_us: float | None
    """The point-to-point link the 'link model' column uses (default: the send_recv fit)."""
    link_bandwidth_gbps: float | None

    split_bytes: int = 0
    """Sizes below and from this one were fitted separately (0: one fit per collective)."""
    form: Literal["rounds", "per_call"] = "rounds"
    """'rounds': steps and volume of the algorithm the communicator runs; 'per_call': nccl-tests'
    alpha per call and busbw factor (NCCL's algorithm is not known from its output)."""

    def factors(self, op: Collective) -> AlgorithmFactors:
        """Steps, volume and busbw factor of `op` in this calibration's form."""
        return FACTORS[self.form](op, self.world_size)

    def fits_for(self, op: Collective) -> list[CollectiveFit]:
        """The fits of one collective, by size range."""
        return sorted((f for f in self.fits if f.op == op), key=lambda f: f.min_bytes)

    def fit_for(self, op: Collective, size_bytes: int) -> CollectiveFit | None:
        """The fit that covers this size (the first one below them all), as the cost model picks."""
        fits = self.fits_for(op)
        return next((f for f in reversed(fits) if f.min_bytes <= size_bytes), fits[0] if fits else None)

    def predict_s(self, m: Measurement) -> float | None:
        """The fitted time of a measured point."""
        fit = self.fit_for(m.op, m.size_bytes)
        return None if fit is None else fit.predict_s(m.size_bytes)

    def link_predict_s(self, m: Measurement) -> float | None:
        """The analytic model before the fit: the link's alpha and bandwidth, the algorithm's
        steps and volume (what a cost model does from link figures alone)."""
        if self.link_alpha_us is None or self.link_bandwidth_gbps is None or self.form != "rounds":
            return None
        return predict_s(algorithm_factors(m.op, self.world_size), m.size_bytes,
                         self.link_alpha_us * 1e-6, self.link_bandwidth_gbps * 1e9)


def fit_all(measurements: tuple[Measurement, ...], world_size: int, *, backend: str,
            library: str, scope: Literal["intra", "inter"], source: str,
            split_bytes: int = 1 << 20, link_alpha_us: float | None = None,
            link_bandwidth_gbps: float | None = None,
            form: Literal["rounds", "per_call"] = "rounds") -> Calibration:
    """Fit every measured collective, sizes below and from `split_bytes` apart when both were
    measured (0: one fit each). The link defaults to the send_recv fits: alpha from the small
    messages, bandwidth from the large ones."""
    fits = []
    for op in dict.fromkeys(m.op for m in measurements):
        points = [m for m in measurements if m.op == op]
        small = [m for m in points if m.size_bytes < split_bytes]
        large = [m for m in points if m.size_bytes >= split_bytes]
        if small and large:
            fits += [fit_collective(op, world_size, small, form=form),
                     fit_collective(op, world_size, large, min_bytes=split_bytes, form=form)]
        else:
            fits.append(fit_collective(op, world_size, points, form=form))
    p2p = [f for f in fits if f.op is Collective.SEND_RECV]
    p2p = p2p if form == "rounds" else []  # a per-call fit is no per-round link
    if link_alpha_us is None and p2p:
        link_alpha_us = p2p[0].alpha_us
    if link_bandwidth_gbps is None and p2p:
        link_bandwidth_gbps = p2p[-1].bandwidth_gbps
    return Calibration(world_size=world_size, backend=backend, library=library, scope=scope,
                       source=source, measurements=measurements, fits=tuple(fits),
                       link_alpha_us=link_alpha_us, link_bandwidth_gbps=link_bandwidth_gbps,
                       split_bytes=split_bytes if any(f.min_bytes for f in fits) else 0, form=form)
