import pytest

from marlang.agents import parse_action

LEGAL = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle"]


@pytest.mark.parametrize(
    "text, action, how",
    [
        ("Action: go forward", "go forward", "exact"),
        ("I see the key ahead.\nAction: pick up", "pick up", "exact"),
        ("Thinking...\nACTION:  Go   Forward.", "go forward", "normalized"),
        ("action - turn_left", "turn left", "normalized"),
        ("toggle", "toggle", "exact"),
        ("The door is locked so I will toggle it with my key now", "toggle", "mentioned"),
        ("Action: I will turn right to face the door", "turn right", "mentioned"),
        ("Action: go forwards", "go forward", "nearest"),
        ("Action: pickup", "pick up", "nearest"),
    ],
)
def test_parses_lenient_forms(text, action, how):
    parsed = parse_action(text, LEGAL)
    assert parsed.action == action
    assert parsed.how == how


def test_takes_the_last_action_marker_and_keeps_the_thought():
    parsed = parse_action("Action: drop\nOn second thought the key matters.\nAction: pick up", LEGAL)
    assert parsed.action == "pick up"
    assert parsed.thought.startswith("Action: drop")


def test_prefers_the_last_mention_when_there_is_no_marker():
    assert parse_action("Not turn left; better go forward", LEGAL).action == "go forward"


@pytest.mark.parametrize("text", ["", "I am not sure what to do.", "Action: dance", "Action: 42"])
def test_returns_none_when_nothing_matches(text):
    parsed = parse_action(text, LEGAL)
    assert parsed.action is None
    assert parsed.how == "none"


def test_needs_legal_actions():
    with pytest.raises(ValueError):
        parse_action("go forward", [])
