"""Ranking tools for a query: BM25 over names, descriptions and parameters.

Local and deterministic: no embeddings, no network. The index and the query
normalise words alike: case, stop words, common short forms ("org", "repos"),
British spellings ("organisation") and a light suffix stripper ("reviews",
"starred", "creation"), so that a word finds its other forms.

A query ranks first the tools that have the most of its words; among those,
the tool whose *name* has the most of them — the name alone, or with one of
its operations: the values of a required enum argument, such as
``pull_request_read`` with ``method: "get_reviews"`` —, then the most in the
query's own form ("alerts", not "alert"), then the name that says the least
else; then BM25. Every weight that does not depend on the query is computed
once, when the index is built, so a query is a few dictionary lookups, sums in
C and one partial sort, then a re-ranking of the best 50 (well under a
millisecond over 5,000 tools).
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from itertools import compress, islice, repeat
from operator import add, eq, gt
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
# Short forms that tool names, parameters and queries use for the whole word.
_SHORT_FORMS = {
    "admin": "administrator",
    "admins": "administrators",
    "app": "application",
    "apps": "applications",
    "arg": "argument",
    "args": "arguments",
    "config": "configuration",
    "configs": "configurations",
    "db": "database",
    "dbs": "databases",
    "dir": "directory",
    "dirs": "directories",
    "env": "environment",
    "envs": "environments",
    "img": "image",
    "imgs": "images",
    "info": "information",
    "msg": "message",
    "msgs": "messages",
    "org": "organization",
    "orgs": "organizations",
    "param": "parameter",
    "params": "parameters",
    "pkg": "package",
    "pkgs": "packages",
    "repo": "repository",
    "repos": "repositories",
}
# British -ise/-isation as -ize/-ization ("organisation", "authorised"); three
# letters first, so that short words ("raise", "noise") keep their spelling.
_BRITISH = re.compile(r"(?<=[a-z]{3})is(?=(?:e|ed|es|ing|ation|ations)$)")
# How much a word counts, by where it occurs: a tool's name says most about it.
_NAME = 3.0
_DESCRIPTION = 1.0
_PARAMETER = 1.5
_OPERATION = 1.5  # a value of a required enum argument: it names what the call does
_DETAIL = 0.5  # a parameter's description and its other enum values
_K1 = 1.2
_B = 0.75
# A column's weight packs, above the term's BM25 weight, that the tool has the
# term and whether its name (or one of its operations) has it: summed over the
# query's terms, the score orders by terms matched, then terms named, then BM25.
_MATCHED = 1e9
_NAMED = 1e5
_PREFIX = 0.5  # a query word that only starts a word of the index ("dependa" -> "dependabot")
_MAX_PREFIXED = 32
_RERANKED = 50  # candidates re-ranked by how well their names say the query
_MAX_TEXT = 4_000  # characters of one description that are indexed
_MAX_PARAMETERS = 64
_MAX_OPERATIONS = 64


def _stem(word: str) -> str:
    """A light, deterministic suffix stripper.

    issues/issue, starred/star, listing/list, creation/create, assignees/assign.
    """
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
    if len(word) > 6 and word.endswith(("sion", "tion")):
        word = word[:-3]  # creation -> creat, deletion -> delet
    elif len(word) > 5 and word.endswith("ee"):
        word = word[:-2]  # assignee -> assign
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]  # create / created -> creat
    return word


@functools.lru_cache(maxsize=65_536)
def _form(word: str) -> str:
    """A word as written, normalised (case, short form, spelling); ``""`` for a stop word."""
    word = word.casefold()
    if word in _STOPWORDS:
        return ""
    word = _SHORT_FORMS.get(word, word)
    return _BRITISH.sub("iz", word) if "is" in word else word


@functools.lru_cache(maxsize=65_536)
def _term(word: str) -> str:
    """The term of one word, or ``""`` for a stop word (words repeat: cached)."""
    form = _form(word)
    return _stem(form) if form else ""


def terms(text: str) -> list[str]:
    """The searchable terms of ``text``, in order (stop words left out)."""
    return [term for term in map(_term, _WORD.findall(text)) if term]


def _forms(text: str) -> frozenset[str]:
    """The normalised words of ``text``, unstemmed (stop words left out)."""
    return frozenset(form for form in map(_form, _WORD.findall(text)) if form)


def _add(counts: dict[str, float], text: object, weight: float) -> None:
    if isinstance(text, str) and text:
        for term in terms(text[:_MAX_TEXT]):
            counts[term] = counts.get(term, 0.0) + weight


def _document(name: str, description: str, parameters: Any) -> tuple[dict[str, float], list[str]]:
    """One tool's weighted term counts, and its operations (see :data:`_OPERATION`)."""
    counts: dict[str, float] = {}
    operations: list[str] = []
    _add(counts, name, _NAME)
    _add(counts, description, _DESCRIPTION)
    props = parameters.get("properties") if isinstance(parameters, _MAPPING) else None
    if isinstance(props, _MAPPING):
        required = parameters.get("required")
        chosen = (
            {key for key in required if isinstance(key, str)}
            if isinstance(required, list)
            else set()
        )
        for key, sub in list(props.items())[:_MAX_PARAMETERS]:
            _add(counts, key, _PARAMETER)
            if isinstance(sub, _MAPPING):
                _add(counts, sub.get("description"), _DETAIL)
                values = sub.get("enum")
                if isinstance(values, list):
                    operation = key in chosen  # a required choice selects what the call does
                    for value in values[:_MAX_PARAMETERS]:
                        _add(counts, value, _OPERATION if operation else _DETAIL)
                        if operation and isinstance(value, str):
                            operations.append(value)
    return counts, operations[:_MAX_OPERATIONS]


class _Name:
    """How a tool's name reads: its terms and forms, alone and with each operation."""

    __slots__ = ("added", "forms", "operations", "terms")

    terms: frozenset[str]
    forms: frozenset[str]
    #: ``(terms, forms, the terms only the operation adds)`` of the name with each operation
    operations: tuple[tuple[frozenset[str], frozenset[str], frozenset[str]], ...]
    #: the terms that only its operations add
    added: frozenset[str]

    def __init__(self, name: str, operations: list[str]) -> None:
        self.terms = frozenset(terms(name)) or frozenset({""})
        self.forms = _forms(name)
        variants: dict[tuple[frozenset[str], frozenset[str]], frozenset[str]] = {}
        for operation in operations:
            own = frozenset(terms(operation)) - self.terms
            if own:  # an operation that adds no word reads as the name alone
                variants.setdefault((self.terms | own, self.forms | _forms(operation)), own)
        self.operations = tuple((words, forms, own) for (words, forms), own in variants.items())
        self.added = frozenset().union(*variants.values())


class SearchIndex:
    """BM25 weights of a tool set: term -> {tool position: packed weight}.

    A query sums, per tool, the weights of its terms, each packed with
    :data:`_MATCHED` and, when the tool's name or one of its operations has the
    term, :data:`_NAMED`. The sums run in C (``map`` over the candidates, one
    column per term): a query over 5,000 tools touches each candidate once per
    term without a Python-level loop. The best :data:`_RERANKED` by that sum are
    then ordered by how their names read the query.
    """

    __slots__ = ("_columns", "_names", "_positions", "_vocabulary")

    def __init__(self, tools: Sequence[tuple[str, str, Any]]) -> None:
        """Index ``(name, description, parameters)`` triples (``names`` in sorted order)."""
        self._positions = {name: i for i, (name, _, _) in enumerate(tools)}
        parsed = [_document(*tool) for tool in tools]
        documents = [counts for counts, _ in parsed]
        self._names = [
            _Name(name, operations)
            for (name, _, _), (_, operations) in zip(tools, parsed, strict=True)
        ]
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
            named = self._names[i].terms | self._names[i].added
            for term, tf in doc.items():
                weight = idf[term] * tf * (_K1 + 1) / (tf + norm)
                column = columns.get(term)
                if column is None:
                    column = columns[term] = {}
                column[i] = _MATCHED + (_NAMED if term in named else 0.0) + weight
        self._columns = columns
        self._vocabulary = sorted(columns)

    def search(self, query: str, limit: int) -> list[int]:
        """Positions of the best ``limit`` tools for ``query``, best first, ties by name.

        Tools that match no term of the query are left out; a query that is
        exactly a tool's name finds that tool first.
        """
        columns: list[dict[int, float]] = []
        found_by: list[frozenset[str]] = []  # per query term: the index terms it found
        for term in sorted(set(terms(query))):
            column, found_terms = self._column(term)
            if column:
                columns.append(column)
                found_by.append(found_terms)
        exact = self._positions.get(query.strip())
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
        if len(found) > pool:  # the best by the packed sum; of equal ones, the first tools
            cut = sorted(scores, reverse=True)[pool - 1]
            above = list(compress(keep, map(gt, scores, repeat(cut))))
            tied = compress(keep, map(eq, scores, repeat(cut)))
            keep = above + list(islice(tied, pool - len(above)))
        matched = frozenset().union(*found_by)
        owners: dict[str, list[int]] = {}  # index term -> the query terms that found it
        for n, words in enumerate(found_by):
            for word in words:
                owners.setdefault(word, []).append(n)
        query_forms = _forms(query)

        def reading(words: frozenset[str], forms: frozenset[str]) -> tuple[int, int, float]:
            have = matched & words
            named = len({n for term in have for n in owners[term]})
            return named, len(query_forms & forms), len(have) / len(words)

        names = self._names

        def rank(k: int) -> tuple[float, ...]:
            # Among tools that match as many of the query's words: the one whose
            # name, alone or with one of its operations, has the most of them,
            # then the most in the query's own form ("alerts" over "alert"),
            # then the least else ("list issues": list_issues, then
            # list_issue_types); then the higher BM25 score; ties by name.
            name = names[found[k]]
            best = reading(name.terms, name.forms)
            if not matched.isdisjoint(name.added):
                for words, forms, own in name.operations:
                    if not own.isdisjoint(matched):
                        best = max(best, reading(words, forms))
            named, same, share = best
            score = scores[k]
            return (-(score // _MATCHED), -named, -same, -share, -(score % _NAMED), found[k])

        best = [found[k] for k in sorted(keep, key=rank)[:limit]]
        if exact is not None:  # the tool's own name: first, whatever else matches
            best = [exact, *(i for i in best if i != exact)][:limit]
        return best

    def _column(self, term: str) -> tuple[dict[int, float] | None, frozenset[str]]:
        """The weights of a query term: its own, and (weaker) those of longer terms it starts.

        Also the index terms it found, which the re-ranking looks for in names.
        """
        column = self._columns.get(term)
        found = frozenset([term]) if column is not None else frozenset()
        if len(term) < 3:
            return column, found
        vocabulary = self._vocabulary
        at = bisect.bisect_right(vocabulary, term)
        end = min(at + _MAX_PREFIXED, len(vocabulary))
        if at == end or not vocabulary[at].startswith(term):
            return column, found
        merged = dict(column) if column else {}
        longer = []
        while at < end and vocabulary[at].startswith(term):
            longer.append(vocabulary[at])
            for i, weight in self._columns[vocabulary[at]].items():
                have = merged.get(i, _MATCHED)
                if weight % _MATCHED >= _NAMED and have % _MATCHED < _NAMED:
                    have += _NAMED
                merged[i] = have + weight % _NAMED * _PREFIX
            at += 1
        return merged, found.union(longer)
