"""Measured memory: live bytes of the arrays a rank's state reaches, each buffer once.

Expected values are the arrays' own sizes (float64: 8 bytes per element, bool 1), worked by hand.
"""

from __future__ import annotations

import numpy as np

from modelplan.execute.checks import scale_hint
from modelplan.execute.memory_probe import PeakTracker, live_bytes


def test_a_buffer_counts_once_and_views_count_their_buffer():
    """A (10, 10) float64 array is 800 B; a view and a second reference add nothing."""
    a = np.zeros((10, 10))
    got = live_bytes({"activations": [a, a[2:5], {"again": a}]})
    assert got["activations"] == 800


def test_a_buffer_reached_from_two_roots_counts_for_the_first_term():
    """Weights come before activations: a cached weight is not an activation."""
    w = np.zeros(16)
    got = live_bytes({"weights": w, "activations": {"kept": w}, "other": np.zeros(2, dtype=bool)})
    assert (got["weights"], got["activations"], got["other"]) == (128, 0, 2)


def test_objects_and_dataclasses_are_walked():
    """Arrays inside plain objects and lists of tuples are found (3 x 4 x 8 = 96 B)."""
    class Box:
        def __init__(self):
            self.inner = [(np.zeros(4),), {"k": np.zeros(4)}]
            self.more = np.zeros(4)

    assert live_bytes({"other": Box()})["other"] == 96


def test_the_tracker_keeps_each_terms_peak():
    """Peaks are per term: 80 B of activations, then 160 B, then 0."""
    t = PeakTracker()
    for n in (10, 20, 0):
        t.observe({"activations": np.zeros(n)})
    assert t.result().peak["activations"] == 160 and t.result().observations == 3


def test_a_uniform_scale_is_reported_as_a_ratio():
    """Gradients all twice the reference with dp = 2: 'x2 (= dp)'; halved: 'x1/2 (= 1/dp)'."""
    ref = {"a": np.arange(1.0, 5.0), "b": np.ones(3)}
    double = {k: 2 * v for k, v in ref.items()}
    assert scale_hint(double, ref, ["a", "b"], {"dp": 2, "tp": 1}) == "all 2 failing tensors are the expected ones x2 (= dp)"
    half = {k: v / 2 for k, v in ref.items()}
    assert "x1/2 (= 1/dp)" in scale_hint(half, ref, ["a", "b"], {"dp": 2})
    noise = {"a": ref["a"] + np.array([0.0, 0.1, 0.0, 0.0]), "b": ref["b"]}
    assert scale_hint(noise, ref, ["a"]) == ""
