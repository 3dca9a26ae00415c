"""The ``marlang`` command line: every subcommand and its arguments."""

from __future__ import annotations

import argparse


def parser(version: str) -> argparse.ArgumentParser:
    """The ``marlang`` command's arguments, subcommand by subcommand (``marlang.cli`` runs them)."""
    p = argparse.ArgumentParser(prog="marlang", description="Multi-agent RL with language-model agents.")
    p.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    p.add_argument("--version", action="version", version=f"marlang {version}")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run one experiment config (every setting of its grid: section and "
                                   "every seed of run.seeds, if any)")
    r.add_argument("config", nargs="?", help="YAML config (optional with --resume)")
    r.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set run.episodes=5 (repeatable)")
    r.add_argument("--unset", action="append", default=[], metavar="KEY",
                   help="remove a key the config sets, e.g. --unset learning.memory_size (repeatable)")
    r.add_argument("--out", help="run directory (default: runs/<run.name>-<time>)")
    r.add_argument("--resume", metavar="DIR", help="continue an interrupted run in DIR")

    c = sub.add_parser("compare", help="run every combination of a grid and write one table")
    c.add_argument("config")
    c.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                   help="values to compare, e.g. --grid protocol=none,bidirectional,alternating-2 "
                        "(repeatable; default: the config's grid: section)")
    c.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    c.add_argument("--unset", action="append", default=[], metavar="KEY", help="remove a key the config sets")
    c.add_argument("--out", help="comparison directory (default: runs/<run.name>-compare); rerun to resume")
    c.add_argument("--seeds", metavar="S1,S2", help="run every setting once per seed, e.g. --seeds 0,1,2 "
                   "(sets run.seeds; the table pools each setting's seeds)")
    c.add_argument("--no-reference", action="store_true",
                   help="skip the scripted reference team (a user's graph has none)")
    c.add_argument("--no-crossplay", action="store_true",
                   help="skip the swapped-seed check that follows a grid over seeds of a learner training a team "
                        "(each trained agent beside the partners trained on the other seeds: marlang crossplay)")
    c.add_argument("--crossplay-episodes", type=int, metavar="N",
                   help="held-out episodes (a graph's: inputs of its task) each cell of the swapped-seed check "
                        "plays (it plays seeds^2 cells per setting; default: learning.eval_episodes, else 32; 0 "
                        "skips the check)")
    x = sub.add_parser("crossplay", help="play a pool of players against each other, slot by slot (a graph's "
                                         "slots: its marked prompts), on the held-out levels (a graph: its task's "
                                         "inputs): a matrix per slot pair and the cross-play gap")
    x.add_argument("config", help="YAML config: the env, model and protocol the cells play, or the graph and task")
    x.add_argument("--players", nargs="+", required=True, metavar="NAME=RUN_DIR|scripted|base",
                   help="the pool: trained runs (adapters, LangMARL policy, Reflexion memory, neural policy; a "
                        "graph's: LangMARL prompts, Reflexion lessons), the env's scripted agent, the untrained base "
                        "model (a graph: the config's prompts)")
    x.add_argument("--episodes", type=int, default=32,
                   help="held-out levels (a graph: inputs of its task) each cell plays (default 32)")
    x.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    x.add_argument("--out", help="cross-play directory (default: runs/<run.name>-crossplay); rerun to resume")
    for parser in (c, x):
        parser.add_argument("--executor", choices=["local", "ray"], default="local",
                            help="local: every setting in this process, one after another (settings share one "
                                 "model where they can); ray: each setting a Ray task with its run.resources "
                                 '(pip install "marlang[ray]")')
        parser.add_argument("--address", metavar="auto|HOST:PORT",
                            help="the Ray cluster to join (--executor ray; default: RAY_ADDRESS, else a Ray "
                                 "instance started on this machine)")

    rev = sub.add_parser("review", help="review a paused update (learning.review: true), then continue the run")
    rev.add_argument("run_dir")
    rev.add_argument("--accept", action="store_true", help="accept every agent's new policy without asking")
    rev.add_argument("--reject", action="store_true", help="reject every agent's new policy without asking")
    rev.add_argument("--edit", action="append", default=[], metavar="AGENT=FILE",
                     help="use the text in FILE as AGENT's new policy (repeatable); the others are accepted")
    rev.add_argument("--show", action="store_true", help="only show the pending update")

    rep = sub.add_parser("report", help="print (and rewrite) the summary of a run or comparison directory")
    rep.add_argument("run_dir")

    v = sub.add_parser("view", help="write one HTML page (no server) to look at runs: table, curves, "
                                    "episodes step by step, credits and policies")
    v.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run or comparison directories")
    v.add_argument("--out", metavar="FILE", help="where to write the page (default: view.html in the first RUN_DIR)")
    v.add_argument("--max-episodes", type=int, default=2000, metavar="N",
                   help="episodes kept per run (default 2000; the page says when some are left out)")
    v.add_argument("--open", action="store_true", help="also open the page in the default browser")

    ex = sub.add_parser("export", help="write a neural run's credit-annotated timesteps as a Hugging Face dataset")
    ex.add_argument("run_dir", metavar="RUN_DIR", help="a neural run with learning.critic")
    ex.add_argument("--format", choices=["parquet", "jsonl"], default="parquet",
                    help="data file format (default parquet)")
    ex.add_argument("--out", metavar="DIR", help="dataset folder (default: RUN_DIR/dataset)")

    cc = sub.add_parser("credit-check", help="grade marlang's credit critics against a counterfactual oracle on a "
                                             "run's recorded episodes; writes credit_check.json")
    cc.add_argument("run_dir", metavar="RUN", help="a run directory with recorded episodes")
    cc.add_argument("--out", metavar="FILE", help="where to write the result (default: RUN/credit_check.json)")
    cc.add_argument("--overwrite", action="store_true",
                    help="replace the file --out names if it exists (without it, an existing result is refused)")
    cc.add_argument("--critics",
                    help="critics to grade, comma-separated, from langmarl, llm_mca, llm_taca, lca, difference "
                         "(default: all the run can be graded with: every one on an env, langmarl on a user's "
                         "graph; llm-mca and llm-taca name the same critics)")
    cc.add_argument("--model", metavar="SPEC", help="model of the LLM critics and of a graph's forked calls "
                                                    "(default: the run config's model.spec)")
    cc.add_argument("--rollout", choices=["recorded", "scripted", "random"], default="recorded",
                    help="how a counterfactual is played on after the step: recorded (the recorded actions where "
                         "still legal, else the no-op or first legal action), scripted (the env's scripted team), "
                         "random (uniform over legal actions, --samples draws); default recorded")
    cc.add_argument("--samples", type=int, metavar="M",
                    help="random rollouts per counterfactual (default 1); on a user's graph, forks per prompt and "
                         "episode (default 4)")
    cc.add_argument("--temperature", type=float, metavar="T",
                    help="on a user's graph, the temperature the forked calls are sampled at (default 0.7)")
    cc.add_argument("--seed", type=int, default=0, help="seed of the random rollouts (default 0)")
    cc.add_argument("--horizon", type=int, metavar="H",
                    help="steps played after the graded one at most (default: to the recorded episode's end)")
    cc.add_argument("--episodes", type=int, metavar="N", help="grade the first N recorded episodes (default: all)")
    cc.add_argument("--steps", type=int, metavar="K", help="graded steps per episode at most, spread evenly "
                    "(default: every step)")
    cc.add_argument("--alternatives", choices=["legal", "default"], default="legal",
                    help="what an agent's action is compared with: every other legal action (default) or its no-op")
    cc.add_argument("--against", choices=["difference", "shapley"], default="difference",
                    help="the oracle credit the critics are graded against (default difference)")
    cc.add_argument("--no-shapley", action="store_true", help="skip the Shapley values (2^n counterfactuals per step)")

    for reads_directories in (r, c, x, rev, rep, cc):  # those that validate configs of directories
        reads_directories.add_argument(
            "--trust-imports", action="store_true",
            help="let the configs of the run and comparison directories it reads import the plugins they name "
                 "by import path (package.module:attr); without it they are refused, as a directory may be a "
                 "stranger's")

    sub.add_parser("envs", help="list the registered environments")
    sub.add_parser("models", help="list the supported model specs")
    sub.add_parser("protocols", help="list the registered conversation protocols")
    sub.add_parser("learners", help="list the registered learning methods")
    return p
