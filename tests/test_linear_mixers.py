"""plan/linear_mixers.py: one table of every linear mixer's kernels and shard."""

from modelplan.count.mixers import LINEAR_MIXERS
from modelplan.plan.linear_mixers import _MIXERS


def test_every_counted_linear_mixer_has_kernels_and_a_shard():
    """The planner's table has a row for each layer type count/mixers.py counts, and no other."""
    assert tuple(_MIXERS) == LINEAR_MIXERS
