"""Every figure marlang writes into a run or comparison folder replaces what is there: a link
planted where a figure goes is replaced, and the file it points at stays as it was."""

from pathlib import Path

import pytest

from marlang.rundir import save_figure
from marlang.statistics.plots import crossplay_figure, iteration_figure, score_vs_cost_figure

ROWS = [{"iteration": i, "return_mean": m, "return_low": m - 0.1, "return_high": m + 0.1, "success_rate": m}
        for i, m in enumerate([0.2, 0.5])]

FIGURES = {
    "learning_curve.png": lambda path: save_figure(iteration_figure({"none": ROWS}), path),
    "score_vs_cost.png": lambda path: save_figure(score_vs_cost_figure(
        {"a": {"cost": 1.0, "score": 0.5}, "b": {"cost": 2.0, "score": 0.7}}, ["a", "b"],
        score_label="return", cost_label="tokens"), path),
    "crossplay.png": lambda path: save_figure(
        crossplay_figure([[0.5, None], [0.2, 0.9]], ["x", "y"], title="cross-play"), path),
}


@pytest.mark.parametrize("name", list(FIGURES))
def test_a_figure_replaces_a_link_planted_where_it_goes_and_leaves_its_target_alone(tmp_path, name):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / name).symlink_to(target)
    FIGURES[name](folder / name)
    assert target.read_text() == "keep me\n"
    assert not (folder / name).is_symlink()
    assert (folder / name).read_bytes().startswith(b"\x89PNG")
    assert sorted(p.name for p in folder.iterdir()) == [name]  # no temporary left behind


def test_a_figure_is_written_where_nothing_was(tmp_path):
    FIGURES["learning_curve.png"](tmp_path / "learning_curve.png")
    assert Path(tmp_path / "learning_curve.png").stat().st_size > 1000
