"""A grid on a served model: every setting and seed of `marlang compare` runs through against a
server that keeps its connections alive (each setting runs on an event loop of its own)."""

from __future__ import annotations

import json

from marlang.cli import main
from marlang.testing import FakeOpenAIServer


def test_a_grid_of_two_settings_and_two_seeds_runs_through_on_a_keep_alive_server(tmp_path, capsys):
    out = tmp_path / "cmp"
    with FakeOpenAIServer(reply="Action: go forward", keep_alive=True) as server:
        config = tmp_path / "c.yaml"
        config.write_text(
            "env: {id: babyai/goto-obj, n_agents: 2, max_steps: 2}\n"
            f"model: {{spec: 'openai:fake', base_url: '{server.base_url}', cache: false, max_retries: 0}}\n"
            "learning: {rollouts: 1, iterations: 1}\n"
            "run: {name: grid, progress: false}\n")
        code = main(["compare", str(config), "--grid", "learning.method=none,reflexion", "--seeds", "0,1",
                     "--no-reference", "--no-crossplay", "--out", str(out)])
        err = capsys.readouterr().err
    assert code == 0, err
    assert "Event loop is closed" not in err
    runs = sorted(p.parent.name for p in out.glob("*/summary.json"))
    assert len(runs) == 4, runs  # two settings, two seeds each
    assert all(json.loads((out / r / "summary.json").read_text()) for r in runs)
    # the connections were kept alive and reused within a setting: fewer connections than calls
    assert server.connections < len(server.requests)
