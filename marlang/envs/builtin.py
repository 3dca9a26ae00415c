"""Every builtin env id, one :class:`~marlang.envs.core.spec.EnvSpec` each, in one table.

An entry point given as ``"package.module:attr"`` is imported when its first env is built, so
the packages behind Overcooked, Pistonball and the credit benchmarks load only then. Ids that
name a scenario (level-based foraging, the robotic warehouse) come from their scenario tables,
``marlang.envs.credit.scenarios``, and a BabyAI level from ``BABYAI_LEVELS``.
"""

from __future__ import annotations

from marlang.envs.babyai.levels import BABYAI_LEVELS
from marlang.envs.core.spec import EnvSpec
from marlang.envs.credit.scenarios import LBF_SCENARIOS, RWARE_SCENARIOS


def _babyai(env_id: str, description: str) -> EnvSpec:
    return EnvSpec(env_id, BABYAI_LEVELS[env_id], description)


def _overcooked(layout: str, description: str) -> EnvSpec:
    env_id = f"overcooked/{layout}"
    return EnvSpec(env_id, "marlang.envs.overcooked.text:OvercookedTextEnv",
                   f"{description}; 400 ticks", kwargs={"layout": layout, "env_id": env_id})


def _pistonball(env_id: str, description: str, pistons: int | None) -> EnvSpec:
    return EnvSpec(env_id, "marlang.envs.pistonball.text:make_pistonball", description,
                   kwargs={"n_pistons": pistons, "env_id": env_id}, default_agents=pistons or 2,
                   options_of=("marlang.envs.pistonball.text:PistonballTextEnv",))


_TASK_OPTIONS = ("marlang.envs.tasks.problems:load_problems",
                 "marlang.envs.tasks.factories:select_tasks")


def _task(env_id: str, task: str, env_class: str, description: str) -> EnvSpec:
    unused = ("sandbox_slice",) if "reasoning" in env_class else ()
    return EnvSpec(env_id, "marlang.envs.tasks.factories:make_task_env", description,
                   kwargs={"task": task, "env_class": env_class, "env_id": env_id},
                   options_of=(env_class, *_TASK_OPTIONS), hidden=("problems", *unused))


def _babyai_numeric(level: str, description: str) -> EnvSpec:
    env_id = f"babyai-marl/{level}"
    return EnvSpec(env_id, "marlang.envs.babyai.numeric:make_babyai_numeric", description,
                   kwargs={"text_id": f"babyai/{level}", "env_id": env_id})


_CODE, _REASONING = "marlang.envs.tasks.coding:CodeTaskEnv", "marlang.envs.tasks.reasoning:"
_NUMERIC_BABYAI = "numeric observations (7x7x3 view, heading, carried object)"

MARL_ENVS: tuple[EnvSpec, ...] = (
    EnvSpec("matrix/climbing", "marlang.envs.credit.climbing:make_climbing",
            "Climbing matrix game (Claus & Boutilier): 2 agents, common payoff, optimum 11; 25 steps",
            success=False),
    *(EnvSpec(env_id, "marlang.envs.credit.lbf:make_lbf", scenario.description,
              kwargs={"scenario": scenario, "env_id": env_id}, default_agents=scenario.agents)
      for env_id, scenario in LBF_SCENARIOS.items()),
    *(EnvSpec(env_id, "marlang.envs.credit.rware:make_rware", scenario.description,
              kwargs={"scenario": scenario, "env_id": env_id}, default_agents=scenario.agents,
              success=False)
      for env_id, scenario in RWARE_SCENARIOS.items()),
    EnvSpec("pistonball/n5-sparse", "marlang.envs.pistonball.numeric:make_pistonball_numeric",
            ("Pistonball, 5 pistons, sparse team reward (+1 at the left wall, -0.1 per cycle), "
             "numeric or text observations; 125 cycles"),
            kwargs={"n_pistons": 5, "env_id": "pistonball/n5-sparse"}, default_agents=5),
    _babyai_numeric("goto-obj", f"babyai/goto-obj with {_NUMERIC_BABYAI} or text; pseudo_reward "
                    "for bringing the target into view"),
    _babyai_numeric("pickup", f"babyai/pickup with {_NUMERIC_BABYAI} or text; pseudo_reward for "
                    "its subgoals"),
    _babyai_numeric("unlock-pickup", f"babyai/unlock-pickup with {_NUMERIC_BABYAI} or text; "
                    "pseudo_reward for its subgoals"),
    _babyai_numeric("put-next", f"babyai/put-next with {_NUMERIC_BABYAI} or text; pseudo_reward "
                    "for its subgoals"),
    EnvSpec("gridworld/two-switch", "marlang.envs.credit.two_switch:make_two_switch",
            ("LCA Two-Switch: trigger both switches to unlock the door, then reach the goal; "
             "2 agents, 9x9 grid, 100 steps")),
    EnvSpec("gridworld/victim-rubble", "marlang.envs.credit.victim_rubble:make_victim_rubble",
            ("LCA Victim-Rubble: a healer heals 2 victims, a clearer clears 3 rubble (2 block the "
             "way to a victim); 2 agents, 11x6 grid, 100 steps")),
    EnvSpec("spaceworld", "marlang.envs.credit.spaceworld:make_spaceworld",
            ("Spaceworld: 2 satellites carry their mirror segments to their destinations on a "
             "10x10 grid; a collision ends the episode; reward 10 minus extra steps; 50 steps")),
)
"""The envs with numeric observations (the credit benchmarks, numeric views of BabyAI and
Pistonball): neural learners train on these."""

BUILTIN_ENVS: tuple[EnvSpec, ...] = (
    _babyai("babyai/goto-obj",
            "Go to an object among distractors in one 8x8 room (BabyAI GoToLocal); max 64 steps"),
    _babyai("babyai/pickup",
            ("Move the ball blocking a locked door, take its key, open it, pick up the box "
             "(BabyAI BlockedUnlockPickup); max 576 steps")),
    _babyai("babyai/unlock-pickup",
            ("Take the key, unlock the door, pick up the box in the next room "
             "(BabyAI UnlockPickup); max 288 steps")),
    _babyai("babyai/put-next",
            ("Put one object next to another in one 8x8 room with 8 objects "
             "(BabyAI PutNextLocal); max 128 steps")),
    _overcooked("cramped-room", "Overcooked-AI Cramped Room: two cooks, one pot, a tight kitchen"),
    _overcooked("asymmetric-advantages", ("Overcooked-AI Asymmetric Advantages: two kitchens, "
                                          "each cook near different things")),
    _overcooked("coordination-ring",
                "Overcooked-AI Coordination Ring: a one-cell-wide ring the cooks share"),
    _overcooked("forced-coordination",
                "Overcooked-AI Forced Coordination: items must be passed over the counter"),
    _overcooked("counter-circuit",
                "Overcooked-AI Counter Circuit (one order): a loop around a central counter"),
    *(_pistonball(f"pistonball/n{n}", f"PettingZoo Pistonball, {n} pistons (agents): ball to the "
                  "left wall; 125 cycles", n) for n in (5, 10, 20)),
    _pistonball("pistonball", ("PettingZoo Pistonball with n_agents pistons (2 to 20): ball to the "
                               "left wall; 125 cycles"), None),
    _task("code/humaneval", "humaneval", _CODE, ("HumanEval: a team writes Python functions run "
                                                 "against hidden tests (164, offline); 2 turns")),
    _task("code/mbpp", "mbpp", _CODE,
          "MBPP (sanitized): a team writes Python functions run against hidden tests; 2 turns"),
    _task("code/coophumaneval", "coophumaneval", _CODE,
          "CoopHumanEval: HumanEval-style problems made for helper + main cooperation; 2 turns"),
    _task("math/math", "math", f"{_REASONING}MathTaskEnv",
          "MATH: a team solves competition math problems, final answer in \\boxed{}; 1 turn"),
    _task("qa/hotpotqa", "hotpotqa", f"{_REASONING}QATaskEnv", ("HotPotQA (distractor): multi-hop "
          "questions over Wikipedia paragraphs, F1 reward; 1 turn")),
    *MARL_ENVS,
)
"""Every builtin env id, in the order ``marlang envs`` groups them."""
