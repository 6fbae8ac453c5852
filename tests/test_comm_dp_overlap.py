"""DP overlap limits: the last gradient bucket, the first parameter bucket, FSDP prefetch.

Expected values are worked by hand from the rules in modelplan/comm/dp_overlap.py's docstring;
the bucket rule is Megatron-core's max(40M, 1M x dp)."""

import pytest

from modelplan.comm.dp_overlap import (
    bucket_fraction,
    grad_reduce_exposed_s,
    megatron_bucket_params,
    param_gather_exposed_s,
    prefetch_exposed_s,
)


def test_megatron_bucket_rule():
    """40M parameters up to dp 40, then 1M per rank (dp 64: 64M)."""
    assert megatron_bucket_params(8) == 40_000_000
    assert megatron_bucket_params(64) == 64_000_000


def test_bucket_fraction():
    """A 400M-parameter stage in 40M buckets: one bucket is a tenth; a small stage is one bucket."""
    assert bucket_fraction(400_000_000, 40_000_000) == pytest.approx(0.1)
    assert bucket_fraction(1_000, 40_000_000) == 1.0


def test_grad_reduce_keeps_the_last_bucket():
    """10 s of reduction behind a 100 s backward still exposes its 1 s last bucket."""
    assert grad_reduce_exposed_s(10.0, 1.0, 100.0, overlap=True) == 1.0


def test_grad_reduce_longer_than_backward():
    """10 s of reduction behind a 6 s window: 4 s exposed (more than the 1 s bucket)."""
    assert grad_reduce_exposed_s(10.0, 1.0, 6.0, overlap=True) == pytest.approx(4.0)


def test_no_overlap_exposes_all():
    """Overlap off: the whole collective."""
    assert grad_reduce_exposed_s(10.0, 1.0, 100.0, overlap=False) == 10.0
    assert param_gather_exposed_s(10.0, 1.0, 100.0, overlap=False) == 10.0


def test_param_gather_keeps_the_first_bucket():
    """The first layer waits for its bucket: 2 s of a 10 s gather behind a 50 s forward."""
    assert param_gather_exposed_s(10.0, 2.0, 50.0, overlap=True) == 2.0


def test_prefetch():
    """4 units, 3 s gathers, 2 s compute: 3 + 3 x 1 = 6 s with prefetch, 12 s without."""
    assert prefetch_exposed_s(3.0, 2.0, 4, prefetch=True) == pytest.approx(6.0)
    assert prefetch_exposed_s(3.0, 2.0, 4, prefetch=False) == pytest.approx(12.0)
    assert prefetch_exposed_s(1.0, 2.0, 4, prefetch=True) == pytest.approx(1.0)
