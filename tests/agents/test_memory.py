import pytest

from marlang.agents import ReflexionMemory


def test_long_term_memory_is_bounded_and_keeps_the_newest():
    mem = ReflexionMemory(capacity=3)
    for i in range(5):
        mem.add_reflection(f"lesson {i}")
    assert mem.reflections == ["lesson 2", "lesson 3", "lesson 4"]
    rendered = mem.render_reflections()
    assert "lesson 4" in rendered and "lesson 1" not in rendered


def test_blank_reflections_are_ignored_and_empty_memory_renders_nothing():
    mem = ReflexionMemory(capacity=2)
    mem.add_reflection("   ")
    assert mem.reflections == []
    assert mem.render_reflections() == ""


def test_short_term_buffers_are_per_episode_and_cleared_at_the_end():
    mem = ReflexionMemory()
    for t in range(6):
        mem.record(0, f"e0 step {t}")
    mem.record(1, "e1 step 0")
    assert mem.recent(0, 2) == ["e0 step 4", "e0 step 5"]
    assert mem.recent(1, 5) == ["e1 step 0"]
    assert mem.recent(0, 0) == []
    assert len(mem.end_episode(0)) == 6
    assert mem.recent(0, 3) == []
    assert mem.recent(1, 1) == ["e1 step 0"]


def test_long_term_memory_persists_through_state_dict():
    mem = ReflexionMemory(capacity=2)
    mem.add_reflection("a")
    mem.add_reflection("b")
    mem.record(0, "short-term entries are not persisted")
    restored = ReflexionMemory(capacity=2)
    restored.load_state_dict(mem.state_dict())
    assert restored.reflections == ["a", "b"]
    restored.load_state_dict({"reflections": ["x", "y", "z"]})
    assert restored.reflections == ["y", "z"]


def test_capacity_must_be_positive():
    with pytest.raises(ValueError, match="memory_size"):
        ReflexionMemory(capacity=0)
