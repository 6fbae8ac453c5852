"""Alpha-beta fits of measured collectives, and the cluster profile TOML they are written to.

Model of one call of a collective on p ranks, for the algorithm the communicator runs
(`collectives.py`): time_s = steps * alpha_s + volume_factor * size_bytes * beta, where steps are
the rounds on the critical path and volume_factor * size_bytes the bytes the busiest rank sends
(Hockney's alpha-beta model; size_bytes in the nccl-tests sense, see `calibrate.py`). alpha and
beta are fitted per collective by least squares on the relative error (each row divided by its
measured time, so 1 KiB and 16 MiB points weigh the same).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict

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
    if op is Collective.BROADCAST:  # binomial tree: the root sends all n in each of lg rounds
        return AlgorithmFactors("binomial", lg, float(lg), 1.0)  # busbw factor 1, nccl-tests
    if op is Collective.SEND_RECV:  # one message each way at once
        return AlgorithmFactors("direct", 1, 1.0, 1.0)
    if op is Collective.BARRIER:  # dissemination: lg rounds, no payload (Hensgen et al. 1988)
        return AlgorithmFactors("dissemination", lg, 0.0, 0.0)
    raise ModelplanError(f"no calibration model for {op}")


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


def fit_collective(op: Collective, p: int, points: list[Measurement]) -> CollectiveFit:
    """Least squares on the relative error of time = steps*alpha + volume*size*beta (>= 0)."""
    f = algorithm_factors(op, p)
    t = np.array([m.time_s for m in points])
    a = np.full_like(t, float(f.steps)) / t  # rows divided by the measured time
    b = np.array([f.volume_factor * m.size_bytes for m in points]) / t
    ones = np.ones_like(t)
    candidates = []  # (alpha_s, beta_s_per_byte)
    if f.volume_factor and p > 1 and len(points) >= 2:
        (alpha, beta), *_ = np.linalg.lstsq(np.stack([a, b], axis=1), ones, rcond=None)
        if alpha >= 0 and beta > 0:
            candidates.append((alpha, beta))
    if f.volume_factor and b.any():  # bandwidth only, alpha = 0
        candidates.append((0.0, float(b @ ones / (b @ b))))
    if a.any():  # latency only
        candidates.append((float(a @ ones / (a @ a)), 0.0))
    if not candidates:
        raise ModelplanError(f"{op} on {p} rank(s) moves nothing: nothing to fit")

    def worst(c: tuple[float, float]) -> float:
        return float(np.max(np.abs(a * c[0] + b * c[1] - 1.0)))

    alpha, beta = min(candidates, key=lambda c: float(np.sum((a * c[0] + b * c[1] - 1.0) ** 2)))
    return CollectiveFit(op=op, algorithm=f.algorithm, ranks=p, steps=f.steps,
                         volume_factor=f.volume_factor, busbw_factor=f.busbw_factor,
                         alpha_us=alpha * 1e6, bandwidth_gbps=(1 / beta / 1e9) if beta else None,
                         points=len(points), max_rel_err=worst((alpha, beta)))


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

    def fit(self, op: Collective) -> CollectiveFit | None:
        return next((f for f in self.fits if f.op == op), None)

    def link_predict_s(self, m: Measurement) -> float | None:
        """The analytic model before the fit: the link's alpha and bandwidth, the algorithm's
        steps and volume (what a cost model does from link figures alone)."""
        if self.link_alpha_us is None or self.link_bandwidth_gbps is None:
            return None
        return predict_s(algorithm_factors(m.op, self.world_size), m.size_bytes,
                         self.link_alpha_us * 1e-6, self.link_bandwidth_gbps * 1e9)


def fit_all(measurements: tuple[Measurement, ...], world_size: int, *, backend: str,
            library: str, scope: Literal["intra", "inter"], source: str,
            link_alpha_us: float | None = None,
            link_bandwidth_gbps: float | None = None) -> Calibration:
    """Fit every measured collective; the link defaults to the send_recv fit."""
    fits = []
    for op in dict.fromkeys(m.op for m in measurements):
        fits.append(fit_collective(op, world_size, [m for m in measurements if m.op == op]))
    p2p = next((f for f in fits if f.op is Collective.SEND_RECV), None)
    if link_alpha_us is None and p2p is not None:
        link_alpha_us = p2p.alpha_us
    if link_bandwidth_gbps is None and p2p is not None:
        link_bandwidth_gbps = p2p.bandwidth_gbps
    return Calibration(world_size=world_size, backend=backend, library=library, scope=scope,
                       source=source, measurements=measurements, fits=tuple(fits),
                       link_alpha_us=link_alpha_us, link_bandwidth_gbps=link_bandwidth_gbps)


def _toml_value(value: object) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, float):
        text = f"{value:.6g}"  # TOML needs a '.' or an exponent to read a float back
        return text if any(c in text for c in ".ein") else text + ".0"
    return str(value)


def profile_toml(cal: Calibration) -> str:
    """The cluster profile: `[fitted.<collective>]` tables, plus the cluster-spec form."""
    lines = [
        "# Cluster profile written by `modelplan calibrate`: an alpha-beta fit per collective.",
        "# Per call: time_s = steps * alpha_us * 1e-6 + volume_factor * size_bytes / "
        "(bandwidth_gbps * 1e9),",
        "#   steps / volume_factor: rounds and bytes sent by the busiest rank per byte of the",
        "#   nccl-tests size (all_gather: gathered output; reduce_scatter: input per rank).",
        "# Same fit, nccl-tests form: time_s = call_alpha_us * 1e-6 + size_bytes * busbw_factor"
        " / (busbw_gbps * 1e9).",
        "# GB/s = 1e9 bytes/s.",
        f"source = {_toml_value(cal.source)}",
        f"world_size = {cal.world_size}",
        f"scope = {_toml_value(cal.scope)}",
        f"backend = {_toml_value(cal.backend)}",
        f"library = {_toml_value(cal.library)}",
    ]
    for fit in cal.fits:
        lines += ["", f"[fitted.{fit.op}]"]
        row = {"algorithm": fit.algorithm, "ranks": fit.ranks, "steps": fit.steps,
               "volume_factor": fit.volume_factor, "busbw_factor": fit.busbw_factor,
               "alpha_us": fit.alpha_us, "bandwidth_gbps": fit.bandwidth_gbps,
               "call_alpha_us": fit.call_alpha_us, "busbw_gbps": fit.busbw_gbps,
               "points": fit.points, "max_rel_err": fit.max_rel_err}
        lines += [f"{k} = {_toml_value(v)}" for k, v in row.items() if v is not None]
    lines += ["", "# The same fits in the cluster spec's form (Cluster.collective_fits: alpha_us",
              "# per call, busbw_gbps in the nccl-tests convention), to paste into a cluster TOML."]
    for fit in cal.fits:
        if fit.busbw_gbps is None:
            continue
        lines += ["", "[[collective_fits]]"]
        row = {"op": str(fit.op), "scope": cal.scope, "ranks": fit.ranks,
               "alpha_us": fit.call_alpha_us, "busbw_gbps": fit.busbw_gbps, "source": cal.source}
        lines += [f"{k} = {_toml_value(v)}" for k, v in row.items()]
    return "\n".join(lines) + "\n"
