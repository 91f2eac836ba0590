"""Ranking tools for a query: BM25 over names, descriptions and parameters.

Local and deterministic: no embeddings, no network. Every weight that does not
depend on the query is computed once, when the index is built, so a query is a
few dictionary lookups and one partial sort (well under a millisecond over
5,000 tools).
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from itertools import compress, repeat
from operator import add, ge
from typing import Any

__all__ = ["SearchIndex", "terms"]

# dict first: the common case skips the slower ABC check
_MAPPING = (dict, Mapping)

# Words: camelCase and PascalCase parts, runs of lower-case letters, digits, and
# runs of other letters (no case to split on); snake_case, dots and dashes separate.
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+|[^\W\d_A-Za-z]+")
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "for",
        "from",
        "has",
        "have",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "their",
        "then",
        "this",
        "to",
        "use",
        "used",
        "uses",
        "using",
        "was",
        "when",
        "which",
        "will",
        "with",
        "you",
        "your",
    ]
)
# How much a word counts, by where it occurs: a tool's name says most about it.
_NAME = 3.0
_DESCRIPTION = 1.0
_PARAMETER = 1.5
_DETAIL = 0.5  # a parameter's description and enum values
_K1 = 1.2
_B = 0.75
_MATCHED = 1e6  # per query term a tool has: more of the query's words rank first
_PREFIX = 0.5  # a query word that only starts a word of the index ("repo" -> "repository")
_MAX_PREFIXED = 32
_RERANKED = 50  # candidates ordered by how well the query covers their names
_MAX_TEXT = 4_000  # characters of one description that are indexed
_MAX_PARAMETERS = 64


def _stem(word: str) -> str:
    """A light, deterministic suffix stripper: issues/issue, starred/star, listing/list."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix, keep in (("ing", 3), ("ed", 3)):
        if word.endswith(suffix) and len(word) - len(suffix) >= keep:
            word = word[: -len(suffix)]
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":
                word = word[:-1]  # starr -> star
            break
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]  # create / created -> creat
    return word


@functools.lru_cache(maxsize=65_536)
def _term(word: str) -> str:
    """The term of one word, or ``""`` for a stop word (words repeat: cached)."""
    word = word.casefold()
    return "" if word in _STOPWORDS else _stem(word)


def terms(text: str) -> list[str]:
    """The searchable terms of ``text``, in order (stop words left out)."""
    return [term for term in map(_term, _WORD.findall(text)) if term]


def _add(counts: dict[str, float], text: object, weight: float) -> None:
    if isinstance(text, str) and text:
        for term in terms(text[:_MAX_TEXT]):
            counts[term] = counts.get(term, 0.0) + weight


def _document(name: str, description: str, parameters: Any) -> dict[str, float]:
    """One tool's weighted term counts."""
    counts: dict[str, float] = {}
    _add(counts, name, _NAME)
    _add(counts, description, _DESCRIPTION)
    props = parameters.get("properties") if isinstance(parameters, _MAPPING) else None
    if isinstance(props, _MAPPING):
        for key, sub in list(props.items())[:_MAX_PARAMETERS]:
            _add(counts, key, _PARAMETER)
            if isinstance(sub, _MAPPING):
                _add(counts, sub.get("description"), _DETAIL)
                values = sub.get("enum")
                if isinstance(values, list):
                    for value in values[:_MAX_PARAMETERS]:
                        _add(counts, value, _DETAIL)
    return counts


class SearchIndex:
    """BM25 weights of a tool set: term -> {tool position: weight}.

    A query sums, per tool, the weights of its terms plus :data:`_MATCHED` for
    each term the tool has, so a tool that matches more of the query's words
    ranks first and BM25 orders those that match as many. The sums run in C
    (``map`` over the candidates, one column per term): a query over 5,000
    tools touches each candidate once per term without a Python-level loop.
    """

    __slots__ = ("_columns", "_name_terms", "_names", "_vocabulary")

    def __init__(self, tools: Sequence[tuple[str, str, Any]]) -> None:
        """Index ``(name, description, parameters)`` triples (``names`` in sorted order)."""
        self._names = {name: i for i, (name, _, _) in enumerate(tools)}
        documents = [_document(*tool) for tool in tools]
        self._name_terms = [frozenset(terms(name)) or frozenset({""}) for name, _, _ in tools]
        total = len(documents)
        lengths = [sum(doc.values()) for doc in documents]
        average = (sum(lengths) / total) if total else 1.0
        frequency: dict[str, int] = {}
        for doc in documents:
            for term in doc:
                frequency[term] = frequency.get(term, 0) + 1
        idf = {
            term: math.log(1 + (total - df + 0.5) / (df + 0.5)) for term, df in frequency.items()
        }
        columns: dict[str, dict[int, float]] = {}
        for i, doc in enumerate(documents):
            norm = _K1 * (1 - _B + _B * lengths[i] / (average or 1.0))
            for term, tf in doc.items():
                weight = idf[term] * tf * (_K1 + 1) / (tf + norm)
                column = columns.get(term)
                if column is None:
                    column = columns[term] = {}
                column[i] = _MATCHED + weight
        self._columns = columns
        self._vocabulary = sorted(columns)

    def search(self, query: str, limit: int) -> list[int]:
        """Positions of the best ``limit`` tools for ``query``, best first, ties by name.

        Tools that match no term of the query are left out; a query that is
        exactly a tool's name finds that tool first.
        """
        matched: set[str] = set()  # the index terms the query's terms found
        columns = [c for c in (self._column(t, matched) for t in sorted(set(terms(query)))) if c]
        exact = self._names.get(query.strip())
        if not columns:
            return [] if exact is None else [exact]
        # Tools that have every term outrank the others: when there are enough of
        # them, only they are scored (a set intersection in C, usually far fewer).
        every = set(columns[0]).intersection(*columns[1:]) if len(columns) > 1 else None
        found = sorted(
            every if every is not None and len(every) >= limit else set().union(*columns)
        )
        total: Iterable[float] = map(columns[0].get, found, repeat(0.0))
        for column in columns[1:]:
            total = map(add, total, map(column.get, found, repeat(0.0)))
        scores = list(total)
        keep: Iterable[int] = range(len(found))
        pool = max(limit, _RERANKED)
        if len(found) > pool:
            cut = sorted(scores, reverse=True)[pool - 1]
            keep = compress(keep, map(ge, scores, repeat(cut)))
        # Among tools that match as many of the query's words, one whose name the
        # query covers best comes first ("list issues": list_issues, then
        # list_issue_types), then the higher BM25 score; ties by name.
        names = self._name_terms

        def rank(k: int) -> tuple[float, float, float, int]:
            name = names[found[k]]
            return (
                -(scores[k] // _MATCHED),
                -len(matched.intersection(name)) / len(name),
                -scores[k],
                found[k],
            )

        best = [found[k] for k in sorted(keep, key=rank)[:limit]]
        if exact is not None:  # the tool's own name: first, whatever else matches
            best = [exact, *(i for i in best if i != exact)][:limit]
        return best

    def _column(self, term: str, matched: set[str]) -> dict[int, float] | None:
        """The weights of a query term: its own, and (weaker) those of longer terms it starts."""
        column = self._columns.get(term)
        if column is not None:
            matched.add(term)
        if len(term) < 3:
            return column
        vocabulary = self._vocabulary
        at = bisect.bisect_right(vocabulary, term)
        end = min(at + _MAX_PREFIXED, len(vocabulary))
        if at == end or not vocabulary[at].startswith(term):
            return column
        merged = dict(column) if column else {}
        while at < end and vocabulary[at].startswith(term):
            matched.add(vocabulary[at])
            for i, weight in self._columns[vocabulary[at]].items():
                partial = (weight - _MATCHED) * _PREFIX
                merged[i] = merged.get(i, _MATCHED) + partial
            at += 1
        return merged
