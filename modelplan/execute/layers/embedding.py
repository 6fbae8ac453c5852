"""Table lookup: rows of `table` for integer ids, with an optional row range (vocab parallel)."""

from __future__ import annotations

import numpy as np


def embedding_forward(table: np.ndarray, ids: np.ndarray, first_row: int = 0) -> np.ndarray:
    """table[ids - first_row] where the id falls in this table's rows, 0 elsewhere; (b, s) -> (b, s, h)."""
    local = ids - first_row
    inside = (local >= 0) & (local < table.shape[0])
    out = table[np.where(inside, local, 0)]
    return out * inside[..., None]


def embedding_backward(
    rows: int, ids: np.ndarray, dout: np.ndarray, first_row: int = 0
) -> np.ndarray:
    """dtable: scatter-add of dout rows onto the looked-up rows (ids outside the range drop out)."""
    local = (ids - first_row).reshape(-1)
    inside = (local >= 0) & (local < rows)
    dtable = np.zeros((rows, dout.shape[-1]), dtype=dout.dtype)
    np.add.at(dtable, local[inside], dout.reshape(-1, dout.shape[-1])[inside])
    return dtable
