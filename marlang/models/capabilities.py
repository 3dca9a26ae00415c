"""What a chat model can do beyond LangChain's interface, as protocols a run checks with
``isinstance``: score the legal actions (`ScoresChoices`), continue a given start of a reply
(`ContinuesPrefill`), run in this process on a local engine (`RunsLocally`), name its weights
(`NamesWeights`) and count tokens exactly (`CountsTokens`). Any LangChain chat model may act;
marlang's declare these properties.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from marlang.models.local_engine import LocalLM


@runtime_checkable
class ScoresChoices(Protocol):
    """A chat model whose calls may pass ``choices=[...]`` (`LocalChatModel`)."""

    @property
    def supports_choices(self) -> bool:
        """Whether the answer may be the choice the model finds most likely."""
        ...


@runtime_checkable
class ContinuesPrefill(Protocol):
    """A chat model whose calls may pass ``prefill`` (`LocalChatModel`)."""

    @property
    def supports_prefill(self) -> bool:
        """Whether the model continues that start of its reply."""
        ...


@runtime_checkable
class RunsLocally(Protocol):
    """A chat model on a `LocalLM` engine in this process (`LocalChatModel`): sections of one
    spec share the engine, trained adapters are attached to it, and the manifest names its
    device."""

    @property
    def engine(self) -> LocalLM:
        ...


@runtime_checkable
class NamesWeights(Protocol):
    """A chat model that names the content hash of its weights (`LocalChatModel`): the
    manifest records it."""

    @property
    def weights_id(self) -> str:
        ...


@runtime_checkable
class CountsTokens(Protocol):
    """A chat model that counts a text's tokens with its own tokenizer (`LocalChatModel`)."""

    def count_tokens(self, text: str) -> int:
        ...


def scores_choices(model: object) -> bool:
    """Whether ``model`` can act by scoring the legal actions."""
    return isinstance(model, ScoresChoices) and model.supports_choices


def continues_prefill(model: object) -> bool:
    """Whether ``model`` can continue a reply it is given the start of."""
    return isinstance(model, ContinuesPrefill) and model.supports_prefill


def engine_of(model: object) -> LocalLM | None:
    """The local engine ``model`` runs on (None: a served or remote model)."""
    return model.engine if isinstance(model, RunsLocally) else None
