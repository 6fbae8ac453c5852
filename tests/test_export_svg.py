"""SVG pictures: well-formed XML, the chosen plan and the memory limit where the axes put them."""

import xml.etree.ElementTree as ET

import pytest

from modelplan.export.plan_picture import write_plan_svg
from modelplan.export.svg import (
    CandidatePoint,
    StageMemory,
    nice_ticks,
    render_candidates_svg,
    render_memory_stages_svg,
)

NS = {"s": "http://www.w3.org/2000/svg"}
POINTS = [
    CandidatePoint(label="dp=8", step_time_s=1.0, memory_gb=75.0, feasible=False),
    CandidatePoint(label="dp=4 tp=2", step_time_s=1.2, memory_gb=50.0),
    CandidatePoint(label="dp=2 tp=4", step_time_s=1.6, memory_gb=30.0),
]


def _by_id(root, element_id):
    found = [e for e in root.iter() if e.get("id") == element_id]
    assert len(found) == 1, f"{element_id}: {len(found)} elements"
    return found[0]


def _tick_x(root, axis_id, label):
    """x of the tick whose text is `label` on the axis group `axis_id`."""
    axis = _by_id(root, axis_id)
    for text in axis.findall("s:text", NS):
        if text.text == label:
            return float(text.get("x"))
    raise AssertionError(f"no tick {label}")


def test_nice_ticks_hand_values():
    """hi 105, 5 ticks: raw step 21 -> 25 (1, 2, 2.5, 5 x 10^k) -> 0, 25, ..., 125."""
    assert nice_ticks(105) == [0, 25, 50, 75, 100, 125]


def test_nice_ticks_from_a_lower_bound():
    """[13.3, 14.3]: raw step 0.2 -> 0.2 -> 13.2, 13.4, ..., 14.4 (13.2 = largest multiple
    of 0.2 <= 13.3)."""
    assert nice_ticks(14.3, lo=13.3) == pytest.approx([13.2, 13.4, 13.6, 13.8, 14.0, 14.2, 14.4])


def test_candidates_svg_parses_and_marks_chosen_and_limit():
    """The SVG is XML with one #chosen-plan and one #memory-limit element."""
    root = ET.fromstring(render_candidates_svg(POINTS, 1, memory_limit_gb=60))
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    _by_id(root, "chosen-plan")
    _by_id(root, "memory-limit")


def test_memory_limit_line_sits_on_its_tick():
    """Limit 60 GB: the dashed line's x equals the x of the '60' tick label on the memory axis
    (ticks 0, 20, ..., 80 for a largest value of 75 GB)."""
    root = ET.fromstring(render_candidates_svg(POINTS, 1, memory_limit_gb=60))
    line = _by_id(root, "memory-limit")
    assert float(line.get("x1")) == pytest.approx(_tick_x(root, "x-axis", "60"), abs=0.1)
    assert line.get("x1") == line.get("x2")


def test_chosen_ring_is_on_the_chosen_point():
    """The ring of #chosen-plan is centred on the candidate circle of 'dp=4 tp=2'."""
    root = ET.fromstring(render_candidates_svg(POINTS, 1, memory_limit_gb=60))
    ring = _by_id(root, "chosen-plan").find("s:circle", NS)
    dots = [c for c in _by_id(root, "candidates").findall("s:circle", NS)
            if c.find("s:title", NS).text.startswith("dp=4 tp=2:")]
    assert (ring.get("cx"), ring.get("cy")) == (dots[0].get("cx"), dots[0].get("cy"))


def test_infeasible_candidates_are_marked():
    """Only the plan over the limit carries the 'infeasible' class."""
    root = ET.fromstring(render_candidates_svg(POINTS, 1, memory_limit_gb=60))
    classes = [c.get("class") for c in _by_id(root, "candidates").findall("s:circle", NS)]
    assert classes == ["candidate infeasible", "candidate", "candidate"]


def test_labels_are_escaped():
    """A label with <, & and quotes still yields well-formed XML and keeps its text."""
    points = [CandidatePoint(label='a<b & "c"', step_time_s=1, memory_gb=1)]
    root = ET.fromstring(render_candidates_svg(points, 0, memory_limit_gb=2, title="x<y"))
    assert 'a<b & "c"' in [t.text for t in _by_id(root, "chosen-plan").iter()]


def test_stage_bars_stack_in_proportion():
    """Stage 0: weights 10 GB and optimizer 20 GB -> the optimizer rect is twice as tall; the
    legend lists the five components."""
    stages = [StageMemory(stage=0, weights_gb=10, optimizer_gb=20, activations_gb=5),
              StageMemory(stage=1, weights_gb=10, optimizer_gb=20, activations_gb=1)]
    root = ET.fromstring(render_memory_stages_svg(stages, memory_limit_gb=40))
    rects = {r.get("class"): float(r.get("height"))
             for r in _by_id(root, "stage-0").findall("s:rect", NS)}
    assert rects["optimizer"] == pytest.approx(2 * rects["weights"], abs=0.2)
    legend = [t.text for t in _by_id(root, "legend").findall("s:text", NS)]
    assert legend == ["weights", "gradients", "optimizer", "activations", "buffers"]
    _by_id(root, "stage-memory-limit")


def test_write_plan_svg_from_a_search_result(tmp_path):
    """A duck-typed search result (bytes, index) becomes one SVG file holding both pictures."""
    result = {
        "candidates": [
            {"plan": {"dp": 8, "tp": 1, "pp": 1}, "step_time_s": 1.0, "memory_bytes": 90e9,
             "fits": False},
            {"plan": {"dp": 4, "tp": 2, "pp": 1}, "step_time_s": 1.2, "memory_bytes": 50e9},
        ],
        "chosen": 1,
        "memory_limit_bytes": 80e9,
        "stages": [{"stage": 0, "weights_bytes": 20e9, "activations_bytes": 30e9}],
    }
    path = write_plan_svg(result, tmp_path / "plan.svg")
    root = ET.fromstring(path.read_text())
    assert _by_id(root, "chosen-plan").find("s:text", NS).text == "dp=4 tp=2 pp=1"
    _by_id(root, "memory-limit")
    _by_id(root, "legend")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.svg"]


def test_write_plan_svg_from_planner_estimates(tmp_path):
    """The planner's shape: `best` estimates (nested step time, memory list in plain bytes,
    memory_budget_bytes); the first is chosen, the limit is its budget, buffers add up."""
    from types import SimpleNamespace as NS_

    def estimate(dp, tp, step_s, peak):
        stage = NS_(stage=0, weights=8e9, gradients=4e9, optimizer=16e9, activations=10e9,
                    comm_buffers=1e9, fragmentation=1e9, reserved=1e9, total=41e9)
        return NS_(plan=NS_(dp=dp, tp=tp, pp=1, cp=1, ep=1, vpp=1), step=NS_(step_time_s=step_s),
                   peak_memory_bytes=peak, memory_budget_bytes=72e9, fits=True, memory=[stage])

    result = NS_(gpus=8, best=[estimate(4, 2, 1.0, 41e9), estimate(8, 1, 1.1, 60e9)],
                 candidates=120)
    root = ET.fromstring(write_plan_svg(result, tmp_path / "p.svg").read_text())
    assert _by_id(root, "chosen-plan").find("s:text", NS).text == "dp=4 tp=2 pp=1"
    assert "72 GB" in _by_id(root, "memory-limit").find("s:title", NS).text
    buffers = [r for r in _by_id(root, "stage-0").findall("s:rect", NS)
               if r.get("class") == "buffers"]
    assert "3 GB" in buffers[0].find("s:title", NS).text  # 1 + 1 + 1 GB


def test_plan_command_writes_the_svg(tmp_path):
    """`modelplan plan ... --svg FILE` writes a well-formed picture with the chosen plan (the
    one the table ranks first, also written by -o) and the device-memory limit of an H100 80GB."""
    import json

    from typer.testing import CliRunner

    from modelplan.cli import app

    svg, doc = tmp_path / "plan.svg", tmp_path / "best.json"
    result = CliRunner().invoke(app, ["plan", "llama-3-8b", "--gpus", "16", "--cluster",
                                      "dgx-h100", "--svg", str(svg), "-o", str(doc)])
    assert result.exit_code == 0, result.output
    root = ET.fromstring(svg.read_text())
    best = json.loads(doc.read_text())["plan"]
    label = _by_id(root, "chosen-plan").find("s:text", NS).text
    assert label.startswith(f"dp={best['dp']} tp={best['tp']} pp={best['pp']}")
    # the H100 80GB's device memory as NVML reports it, 81,559 MiB = 85.52 GB (Modal's table,
    # thundergolfer.com/blog/nvidia-gpu-memory-capacity)
    assert "memory limit 85.52" in _by_id(root, "memory-limit").find("s:title", NS).text
