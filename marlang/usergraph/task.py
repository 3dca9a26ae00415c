"""`play_task`: a user's graph played over a task's inputs, K invocations at a time, each episode
scored by the task's reward; a graph or a reward that fails on one input fails that episode
only, and a reward is a finite number the reward function returned, never the graph's output.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, TypedDict, Unpack

from marlang.config.graph import GraphSpec, Reward, TaskItem, TaskSpec
from marlang.config.sections import shorten
from marlang.usergraph.binding import Binding
from marlang.usergraph.episode import GraphEpisode, arun_graph

logger = logging.getLogger(__name__)


def reward_value(value: Any) -> float:
    """``value`` returned by a reward function as a float, or a ValueError: only a real int or
    float (or a numpy integer or floating scalar) that is finite is a reward. The exact type is
    checked, so an object that only converts to a number (a graph's output with ``__float__``)
    or a bool (what a lying ``__eq__`` returns) is never taken for one."""
    if type(value) in (int, float) or _numpy_number(value):
        number = float(value)
        if math.isfinite(number):
            return number
        raise ValueError(f"the reward function returned {number}, not a finite number")
    hint = "; return 1.0 or 0.0" if type(value) is bool else ""
    kind = type(value)
    raise ValueError(f"the reward function returned a {kind.__module__}.{kind.__qualname__}, "
                     f"not an int or a float{hint}")


def _numpy_number(value: Any) -> bool:
    kind = type(value)
    if kind.__module__ != "numpy":  # numpy's own scalar types only, never a subclass defined elsewhere
        return False
    import numpy as np

    return issubclass(kind, np.integer | np.floating)


def _described(error: BaseException) -> str:
    try:
        text = str(error)
    except Exception:  # noqa: BLE001 - an exception whose message cannot be shown is named by its type
        text = "(its message cannot be shown)"
    return shorten(f"{type(error).__name__}: {text}")


async def score_episode(episode: GraphEpisode, item: TaskItem, output_key: str, reward: Reward) -> None:
    """Set the reward of a finished ``episode`` from the state's ``output_key``, or fail it with why
    there is none (no such key, the reward raised or returned no finite number)."""
    if episode.failed:
        return
    state = episode.output
    if not isinstance(state, dict) or output_key not in state:
        episode.error = f"the graph ended without its output key {output_key!r} (graph.output) in its state"
        return
    answer = state[output_key]  # as the graph left it: the reward judges it, the record holds its text
    try:
        if inspect.iscoroutinefunction(reward):
            value = await reward(item, answer, episode)
        else:  # a slow reward (tests run in a sandbox) leaves the other episodes playing
            value = await asyncio.to_thread(reward, item, answer, episode)
    except Exception as error:  # noqa: BLE001 - a reward failing on one episode fails that episode only
        episode.error = f"the reward raised {_described(error)}"
        return
    try:
        episode.reward = reward_value(value)
    except ValueError as error:
        episode.error = str(error)


class PlayOptions(TypedDict, total=False):
    """How `aplay_task` and `play_task` play a task (every key optional)."""

    binding: Binding | None
    """The prompts and models every invocation is bound to (None: every mark's default)."""
    concurrency: int
    """Invocations in flight at once (8)."""
    limit: int | None
    """Play the first N inputs only (None: all)."""


async def aplay_task(graph_spec: GraphSpec, task_spec: TaskSpec, **options: Unpack[PlayOptions]) -> list[GraphEpisode]:
    """Play the graph of ``graph_spec`` once on each input of ``task_spec`` (the first ``limit``),
    ``concurrency`` invocations at a time, each in its own context bound to ``binding`` (the same
    prompts and models for all; the spec's ``prompts`` for the prompts it does not name), and
    score each episode with the task's reward.

    Returns the episodes in the order of the inputs. What is wrong before anything is played (the
    import paths, the builder's graph and its keys, the data) raises a `ConfigError`; what goes
    wrong on one input (the graph raises or calls no model, its state lacks the output key, the
    reward raises or returns no finite number) fails that episode, with the error and no reward.
    """
    unknown = sorted(set(options) - set(PlayOptions.__annotations__))
    if unknown:
        raise TypeError(f"play_task got {', '.join(map(repr, unknown))}; its options are "
                        f"{', '.join(PlayOptions.__annotations__)}")
    binding, concurrency, limit = options.get("binding"), options.get("concurrency", 8), options.get("limit")
    if graph_spec.prompts:  # the section's texts (a config's graph.prompts), under those the binding names
        given = binding if binding is not None else Binding()
        binding = replace(given, prompts={**graph_spec.prompts, **given.prompts})
    if concurrency < 1:
        raise ValueError(f"concurrency {concurrency}: give at least 1")
    if limit is not None and limit < 1:
        raise ValueError(f"limit {limit}: give at least 1, or None for every input")
    graph = graph_spec.build_graph()
    items = task_spec.load_items(graph_spec.input)[:limit]
    reward = task_spec.reward_function()
    gate = asyncio.Semaphore(concurrency)

    async def play(item: TaskItem) -> GraphEpisode:
        value = item[graph_spec.input] if isinstance(item, Mapping) else item
        async with gate:
            # the graph gets its input only: what the reward needs beside it stays out of its reach
            episode = await arun_graph(graph, {graph_spec.input: value}, binding,
                                       recursion_limit=graph_spec.recursion_limit)
            episode.input = item
            await score_episode(episode, item, graph_spec.output, reward)
        return episode

    episodes = list(await asyncio.gather(*(play(item) for item in items)))
    failed = sum(episode.failed for episode in episodes)
    logger.info("played %d inputs of %s through %s: %d failed", len(episodes), task_spec.data, graph_spec.build,
                failed)
    return episodes


def play_task(graph_spec: GraphSpec, task_spec: TaskSpec, **options: Unpack[PlayOptions]) -> list[GraphEpisode]:
    """`aplay_task` for scripts, on an event loop of its own (inside async code, await
    `aplay_task`); the same options, declared once (`PlayOptions`)."""
    return asyncio.run(aplay_task(graph_spec, task_spec, **options))
