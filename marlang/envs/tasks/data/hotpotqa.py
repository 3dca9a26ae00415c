"""HotPotQA: rows of the distractor setting to records, and SQuAD-style answer scoring.

``qa_exact_match`` and ``qa_f1`` compare answers after lower-casing and dropping
punctuation, articles and extra whitespace, as the HotPotQA and SQuAD evaluations do.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from marlang.envs.tasks.data.problems import QAProblem, RowTable, require_columns

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)
_CLOSED_ANSWERS = frozenset({"yes", "no", "noanswer"})


def normalize_qa_answer(answer: str | None) -> str:
    """Lower-case, drop punctuation and the articles a/an/the, and collapse whitespace."""
    text = (answer or "").lower()
    text = "".join(char for char in text if char not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def qa_exact_match(predicted: str | None, gold: str | None) -> bool:
    """Whether the two answers are equal after ``normalize_qa_answer``."""
    return normalize_qa_answer(predicted) == normalize_qa_answer(gold)


def qa_f1(predicted: str | None, gold: str | None) -> float:
    """Token-level F1 between the normalized answers, in [0, 1].

    A yes/no/noanswer answer scores 0 against any different answer (no partial credit for
    sharing the token "no"); two empty answers score 1, matching ``qa_exact_match``.
    """
    predicted_norm = normalize_qa_answer(predicted)
    gold_norm = normalize_qa_answer(gold)
    if predicted_norm == gold_norm:
        return 1.0
    if predicted_norm in _CLOSED_ANSWERS or gold_norm in _CLOSED_ANSWERS:
        return 0.0
    predicted_tokens = predicted_norm.split()
    gold_tokens = gold_norm.split()
    shared = sum((Counter(predicted_tokens) & Counter(gold_tokens)).values())
    if shared == 0:
        return 0.0
    precision = shared / len(predicted_tokens)
    recall = shared / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def render_context(context: Mapping[str, Sequence[Any]]) -> str:
    """Paragraphs ``{title: [...], sentences: [[...], ...]}`` as ``Title: s1 s2 ...`` blocks."""
    titles = list(context.get("title") or [])
    paragraphs = list(context.get("sentences") or [])
    if len(titles) != len(paragraphs):
        raise ValueError(f"context has {len(titles)} titles but {len(paragraphs)} sentence lists")
    blocks = []
    for title, sentences in zip(titles, paragraphs, strict=True):
        # HotPotQA sentences carry their own leading spaces; strip and re-join evenly.
        text = " ".join(str(sentence).strip() for sentence in sentences if str(sentence).strip())
        blocks.append(f"{title}: {text}")
    return "\n\n".join(blocks)


def _supporting_facts(facts: Mapping[str, Sequence[Any]] | None) -> tuple[tuple[str, int], ...]:
    if not facts:
        return ()
    titles = list(facts.get("title") or [])
    sentence_ids = list(facts.get("sent_id") or [])
    return tuple((str(t), int(i)) for t, i in zip(titles, sentence_ids, strict=True))


def hotpotqa_problems_from_rows(table: RowTable) -> list[QAProblem]:
    """Convert HotPotQA rows (``id, question, answer, context`` plus optional ``type, level,
    supporting_facts``) to records."""
    rows, columns, source, id_prefix = table
    require_columns(columns, ["question", "answer", "context"], source=source, schema="HotPotQA")
    problems = []
    for index, row in rows:
        context = row["context"]
        if not isinstance(context, Mapping):
            raise TypeError(
                f"{source}: row {index} has 'context' of type {type(context).__name__}; "
                "expected {title: [...], sentences: [[...], ...]} as on the Hugging Face hub"
            )
        problems.append(
            QAProblem(
                task_id=str(row.get("id") or f"{id_prefix}{index}"),
                question=str(row["question"]),
                context=render_context(context),
                answer=str(row["answer"] or ""),
                supporting_facts=_supporting_facts(row.get("supporting_facts")),
                level=str(row.get("level") or ""),
                qtype=str(row.get("type") or ""),
                source=source,
            )
        )
    return problems
