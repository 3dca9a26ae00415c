"""A chat model's capabilities are what it declares: marlang's local chat model scores the
legal actions and runs on its engine; another LangChain chat model does neither."""

from __future__ import annotations

from marlang.models.capabilities import continues_prefill, engine_of, scores_choices
from marlang.models.local_engine import LocalLM
from marlang.testing import ScriptedChatModel, tiny_chat_model


def test_the_local_chat_model_scores_choices_on_its_engine(tiny_engine: LocalLM) -> None:
    model = tiny_chat_model(tiny_engine)
    assert scores_choices(model)
    assert engine_of(model) is tiny_engine
    assert engine_of(model.model_copy(update={"temperature": 0.7})) is tiny_engine  # copies share it


def test_another_chat_model_neither_scores_nor_runs_locally() -> None:
    model = ScriptedChatModel(replies=["go forward"])
    assert not scores_choices(model)
    assert engine_of(model) is None
    assert engine_of(None) is None


def test_only_the_local_chat_model_continues_a_prefilled_reply(tiny_engine: LocalLM) -> None:
    assert continues_prefill(tiny_chat_model(tiny_engine))
    assert not continues_prefill(ScriptedChatModel(replies=["go forward"]))
