"""BabyAI-Text descriptions on small hand-built grids, checked line by line."""

from __future__ import annotations

import json

from minigrid.core.grid import Grid
from minigrid.core.mission import MissionSpace
from minigrid.core.world_object import Ball, Door, Key, Wall, WorldObj
from minigrid.minigrid_env import MiniGridEnv

from marlang.envs import AgentState, observe
from marlang.envs.babyai.view import object_name, relative_phrase, with_article


class FakeHandBuiltRoom(MiniGridEnv):
    """A 7x7 walled room holding exactly the given objects, the agent at a given pose."""

    def __init__(
        self,
        objects: list[tuple[WorldObj, tuple[int, int]]],
        agent: tuple[tuple[int, int], int],
        carrying: WorldObj | None = None,
    ):
        self._objects = objects
        self._agent = agent
        self._carrying = carrying
        super().__init__(
            mission_space=MissionSpace(mission_func=lambda: "look around"),
            grid_size=7,
            max_steps=10,
        )

    def _gen_grid(self, width: int, height: int) -> None:
        self.grid = Grid(width, height)
        self.grid.wall_rect(0, 0, width, height)
        for obj, (x, y) in self._objects:
            self.put_obj(obj, x, y)
        self.agent_pos, self.agent_dir = self._agent
        self.mission = "look around"


def wall_with_door(door: Door) -> list[tuple[WorldObj, tuple[int, int]]]:
    """An inner wall down column x=3 with ``door`` at its top, (3, 1)."""
    return [(door, (3, 1))] + [(Wall(), (3, y)) for y in range(2, 6)]


def view_of(room: FakeHandBuiltRoom, others: dict[str, AgentState] | None = None):
    room.reset(seed=0)
    room.carrying = room._carrying
    return observe(room, others or {})


def test_objects_doors_and_walls_on_three_rays():
    # Agent at (3, 5) facing north: right is east, forward is north.
    room = FakeHandBuiltRoom(
        objects=[
            (Key("blue"), (2, 3)),
            (Door("red", is_open=True), (5, 4)),
            (Ball("green"), (3, 2)),  # balls do not hide what is behind them
        ],
        agent=((3, 5), 3),
    )
    assert view_of(room).lines() == [
        "You are at (3, 5) facing north",
        "You see a wall 5 steps forward",
        "You see a wall 3 steps left",
        "You see a wall 3 steps right",
        "You see an open red door 2 steps right and 1 step forward",
        "You see a blue key 1 step left and 2 steps forward",
        "You see a green ball 3 steps forward",
    ]


def test_closed_door_in_a_wall_hides_what_is_behind_and_carried_object_and_agents():
    # Agent at (1, 1) facing east: left is north (the wall right next to it), right is south.
    room = FakeHandBuiltRoom(
        objects=[
            *wall_with_door(Door("purple", is_open=False)),
            (Ball("grey"), (4, 1)),  # behind the closed door: not seen
            (Door("yellow", is_locked=True), (1, 3)),
        ],
        agent=((1, 1), 0),
        carrying=Ball("red"),
    )
    teammate = AgentState(position=(2, 2), direction=3, carrying=Key("blue"))
    view = view_of(room, {"agent_1": teammate})
    assert view.lines() == [
        "You are at (1, 1) facing east",
        "You carry a red ball",
        "You see a wall 1 step left",
        "You see a locked yellow door 2 steps right",
        "You see a closed purple door 2 steps forward",
        "You see agent_1 1 step right and 1 step forward carrying a blue key",
    ]
    assert view.text() == "\n".join(view.lines())


def test_open_door_in_a_wall_lets_the_agent_see_through():
    room = FakeHandBuiltRoom(
        objects=[*wall_with_door(Door("purple", is_open=True)), (Ball("grey"), (4, 1))],
        agent=((1, 1), 0),
    )
    assert view_of(room).lines() == [
        "You are at (1, 1) facing east",
        "You see a wall 5 steps forward",
        "You see a wall 1 step left",
        "You see an open purple door 2 steps forward",
        "You see a grey ball 3 steps forward",
    ]


def test_agents_outside_the_view_or_occluded_are_not_seen():
    room = FakeHandBuiltRoom(
        objects=wall_with_door(Door("purple", is_open=False)), agent=((1, 1), 0)
    )
    others = {
        "agent_1": AgentState((4, 1), 2),  # behind the closed door
        "agent_2": AgentState((2, 5), 2),  # 4 cells to the right: outside the 7x7 view
        "agent_3": AgentState((1, 3), 1),  # 2 steps right: visible
    }
    view = view_of(room, others)
    assert [seen.name for seen in view.agents] == ["agent_3"]
    assert view.lines()[-1] == "You see agent_3 2 steps right"


def test_structured_data_is_plain_json():
    room = FakeHandBuiltRoom(
        objects=[(Key("blue"), (2, 3)), (Door("red", is_locked=True), (5, 4))], agent=((3, 5), 3)
    )
    data = view_of(room, {"agent_1": AgentState((4, 4), 0)}).to_data()
    assert json.loads(json.dumps(data)) == data
    assert data["position"] == [3, 5]
    assert data["direction"] == "north"
    assert data["carrying"] is None
    assert data["walls"] == {"forward": 5, "left": 3, "right": 3}
    key = next(o for o in data["visible_objects"] if o["type"] == "key")
    assert key == {
        "type": "key",
        "color": "blue",
        "state": None,
        "position": [2, 3],
        "relative": {"right": -1, "forward": 2},
    }
    door = next(o for o in data["visible_objects"] if o["type"] == "door")
    assert door["state"] == "locked"
    assert data["visible_agents"] == [
        {
            "name": "agent_1",
            "position": [4, 4],
            "relative": {"right": 1, "forward": 1},
            "direction": "east",
            "carrying": None,
        }
    ]


def test_articles_and_phrases():
    assert with_article("open red door") == "an open red door"
    assert with_article("orange ball") == "an orange ball"
    assert with_article("yellow key") == "a yellow key"
    assert object_name(Door("green", is_open=False)) == "closed green door"
    assert object_name(Door("green", is_locked=True)) == "locked green door"
    assert relative_phrase(-1, 2) == "1 step left and 2 steps forward"
    assert relative_phrase(2, 0) == "2 steps right"
    assert relative_phrase(0, 1) == "1 step forward"
