"""The docs site: the generated reference pages cover the code, and the strict build passes."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MKDOCS = Path(sys.executable).parent / "mkdocs"


@pytest.fixture(scope="module")
def reference():
    """docs/hooks/reference.py, the MkDocs hook that renders the reference pages."""
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "docs" / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def config_page(reference) -> str:
    return reference.render_config_reference()


def test_config_reference_has_every_section_and_key(reference, config_page):
    from marlang.config import ExperimentConfig

    for section in ExperimentConfig.model_fields:
        assert f"## {section} {{#{section}}}" in config_page
    for section, model in reference.config_sections().items():
        for key in model.model_fields if model is not None else []:
            assert f'<a id="{section}.{key}"></a>`{section}.{key}`' in config_page
    # a known key with its type, default and description (a Field description or a note)
    row = next(line for line in config_page.splitlines() if line.startswith('| <a id="run.seed">'))
    assert "| int | `0` |" in row and "two run seeds share no level" in row
    row = next(line for line in config_page.splitlines() if line.startswith('| <a id="model.max_tokens">'))
    assert "Token budget for an action (thought + answer)." in row


def test_config_reference_has_every_learning_methods_keys(reference, config_page):
    for name, (_, entry) in reference.learning_methods().items():
        assert f"{{#learning-{name}}}" in config_page or f'<a id="learning-{name}"></a>' in config_page
        for key in entry.options_model.model_fields:
            assert f"`learning.{key}`" in config_page, (name, key)
    assert "`learning.memory_size`" in config_page
    assert "`learning.lora.layers`" in config_page


def test_cli_reference_lists_every_subcommand(reference):
    page = reference.render_cli_reference()
    commands = reference.subcommands(reference.cli_parser())
    assert {"run", "compare", "review", "report", "envs", "models", "protocols", "learners"} <= set(commands)
    for name, (_, parser) in commands.items():
        assert f"## marlang {name} {{#{name}}}" in page
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}" in page, (name, option)
    assert re.search(r"\| `--set KEY=VALUE` \|.*run\.episodes=5", page)


def test_readme_links_to_existing_docs():
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#\s]+)", readme)
    assert links, "README.md links to no docs page"
    for link in links:
        assert (ROOT / link).is_file(), link


def test_mkdocs_build_strict(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--quiet", "-d", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "reference" / "config" / "index.html").is_file()
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").is_file()


def test_the_langgraph_howto_runs(capsys):
    """docs/howto/langgraph.md's first example: marlang's agents and a protocol graph as a subgraph
    of one's own graph, streamed with its subgraphs and drawn (the page's later blocks name a
    user's own app, ``my_app``)."""
    page = (ROOT / "docs" / "howto" / "langgraph.md").read_text()
    example = re.findall(r"```python\n(.*?)```", page, re.DOTALL)[0]
    space: dict = {"__name__": "langgraph_howto"}
    exec(compile(example, "docs/howto/langgraph.md", "exec", dont_inherit=True), space)  # noqa: S102
    updates = space["updates"]
    inner = {node for namespace, node in updates if namespace and namespace[0].startswith("talk_and_act:")}
    assert inner >= {"speak", "act"}  # the protocol's own nodes, streamed from inside the subgraph
    assert [node for namespace, node in updates if not namespace].count("step") == 3
    assert "subgraph talk_and_act" in space["mermaid"] and "step -.-> talk_and_act" in space["mermaid"]
    assert "subgraph talk_and_act" in capsys.readouterr().out
