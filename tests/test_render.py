"""Human units and breakdown rows of the terminal renderer (modelplan.cli.render)."""

from __future__ import annotations

from modelplan.cli.render import human_bytes, human_count, human_flops, summarise_layers, tree_rows


def test_counts_keep_three_significant_digits():
    """124,439,808 -> 124.4M and 8,030,261,248 -> 8.03B (the README's examples)."""
    assert (human_count(124_439_808), human_count(8_030_261_248)) == ("124.4M", "8.03B")


def test_small_counts_are_plain():
    """Below a thousand the exact number is shown; zero is '0'."""
    assert (human_count(999), human_count(0)) == ("999", "0")


def test_bytes_are_decimal_gigabytes():
    """16,060,522,496 bytes (Llama-3-8B in bf16) is 16.1 GB (1 GB = 1e9 bytes); 1.5e9 is 1.50 GB."""
    assert (human_bytes(16_060_522_496), human_bytes(1_500_000_000)) == ("16.1 GB", "1.50 GB")


def test_flops_use_si_prefixes():
    """2e15 is 2.00 PFLOP; above 1e21 the largest unit (EFLOP) keeps growing: 3150.0 EFLOP."""
    assert (human_flops(2 * 10**15), human_flops(3_150 * 10**18)) == ("2.00 PFLOP", "3150.0 EFLOP")


def test_tree_rows_indent_by_depth():
    """Slash paths become (depth, last segment, value)."""
    rows = tree_rows({"layers": 3, "layers/attention": 2, "layers/attention/qkv": 2})
    assert rows == [(0, "layers", 3), (1, "attention", 2), (2, "qkv", 2)]


def test_layer_summary_groups_equal_sizes():
    """Equal blocks collapse to `n x size`; MoE/dense mixes list each size."""
    assert summarise_layers([1000] * 3) == "3 x 1.00K"
    assert summarise_layers([2_000_000, 5_000_000, 2_000_000]) == "2 x 2.00M, 1 x 5.00M"
