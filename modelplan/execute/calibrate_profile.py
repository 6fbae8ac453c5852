"""The cluster profile `modelplan calibrate` writes: a cluster TOML with measured collectives.

Layout (read back by `modelplan.comm.clusters.load_cluster`, so `modelplan comm --cluster FILE`
and `modelplan plan --cluster FILE` price collectives with the measured fits):

    extends = "dgx-h100"            # the cluster the rest comes from (calibrate --extends)
    name = "dgx-h100+calibrated"
    source = "modelplan calibrate, ..."
    [[collective_fits]]             # one per collective and size range, the cost model's form:
    op = "all_reduce"               #   time_s = alpha_us*1e-6 + size*busbw_factor/(busbw_gbps*1e9)
    scope = "intra"
    ranks = 4
    min_bytes = 1048576             #   only for the large-message range
    alpha_us = 75.0
    busbw_gbps = 3.1
    [calibration]                   # what was measured; not part of the cluster spec
    [[calibration.fitted]]          # the same fits per algorithm round: steps, volume, alpha, 1/beta

Without `extends` the profile still holds every fit, and loading it as a cluster says what to add.
"""

from __future__ import annotations

from modelplan.execute.calibrate_fit import Calibration


def _toml_value(value: object) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, float):
        text = f"{value:.6g}"  # TOML needs a '.' or an exponent to read a float back
        return text if any(c in text for c in ".ein") else text + ".0"
    return str(value)


def _table(row: dict) -> list[str]:
    return [f"{k} = {_toml_value(v)}" for k, v in row.items() if v is not None]


def profile_toml(cal: Calibration, extends: str | None = None) -> str:
    """The profile text: a cluster that `extends` another, with one fit per collective and
    size range."""
    lines = [
        "# Cluster profile written by `modelplan calibrate`: measured collectives on top of a cluster.",
        "# [[collective_fits]], per call (nccl-tests sizes and busbw factors):",
        "#   time_s = alpha_us * 1e-6 + size_bytes * busbw_factor / (busbw_gbps * 1e9),",
        "#   for sizes from min_bytes (default 0) up to the next fit's min_bytes.",
        "# [[calibration.fitted]], the same fit per algorithm round:",
        "#   time_s = steps * alpha_us * 1e-6 + volume_factor * size_bytes / (bandwidth_gbps * 1e9),",
        "#   steps / volume_factor: rounds and bytes sent by the busiest rank per byte of size.",
        "# GB/s = 1e9 bytes/s.",
    ]
    if extends is None:
        lines.append('# To price a cluster with these fits, add: extends = "<cluster preset or file>"')
    else:
        lines += _table({"extends": extends, "name": f"{extends}+calibrated"})
    lines += _table({"source": cal.source})
    for fit in cal.fits:
        if fit.busbw_gbps is None:
            continue  # a barrier has no payload: the cost model keeps its own
        lines += ["", "[[collective_fits]]"]
        lines += _table({"op": str(fit.op), "scope": cal.scope, "ranks": fit.ranks,
                         "min_bytes": fit.min_bytes or None, "alpha_us": fit.call_alpha_us,
                         "busbw_gbps": fit.busbw_gbps, "source": cal.source})
    lines += ["", "[calibration]"]
    lines += _table({"world_size": cal.world_size, "scope": cal.scope, "backend": cal.backend,
                     "library": cal.library, "split_bytes": cal.split_bytes})
    for fit in cal.fits:
        lines += ["", "[[calibration.fitted]]"]
        lines += _table({"op": str(fit.op), "min_bytes": fit.min_bytes, "algorithm": fit.algorithm,
                         "ranks": fit.ranks, "steps": fit.steps, "volume_factor": fit.volume_factor,
                         "busbw_factor": fit.busbw_factor, "alpha_us": fit.alpha_us,
                         "bandwidth_gbps": fit.bandwidth_gbps, "call_alpha_us": fit.call_alpha_us,
                         "busbw_gbps": fit.busbw_gbps, "points": fit.points,
                         "max_rel_err": fit.max_rel_err})
    return "\n".join(lines) + "\n"
