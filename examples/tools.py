"""A small, realistic tool set: a team's docs and issue tracker, in memory.

Read-only tools (``search_docs``, ``get_doc``, ``list_issues``, ``get_issue``)
are concurrency-safe: a program may fan them out with ``asyncio.gather``.
Mutating tools (``create_issue``, ``add_comment``, ``close_issue``) run alone,
in submission order.

Every read simulates a little network latency (``LATENCY`` seconds) so the
benefit of overlapping calls is visible. ``make_registry()`` builds a fresh,
independent tool set; ``registry`` is one ready-made instance.

    ptc tools --tools examples/tools.py:registry
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

import anyio

from registry import ToolError, ToolRegistry

LATENCY = 0.02


class NotFoundError(ToolError):
    """The requested document or issue does not exist."""

    code = "NOT_FOUND"


class DocHit(TypedDict):
    id: str
    title: str
    score: float


class Doc(TypedDict):
    id: str
    title: str
    body: str
    tags: list[str]


class Comment(TypedDict):
    author: str
    text: str


class Issue(TypedDict):
    id: int
    title: str
    state: Literal["open", "closed"]
    labels: list[str]
    comments: list[Comment]
    close_reason: NotRequired[str]


_DOCS: list[Doc] = [
    {
        "id": "retry-policy",
        "title": "Retry policy for outbound HTTP calls",
        "body": "Retry idempotent requests up to 3 times with exponential backoff and jitter. "
        "Never retry a POST without an idempotency key.",
        "tags": ["http", "reliability"],
    },
    {
        "id": "timeouts",
        "title": "Timeouts and deadlines",
        "body": "Every outbound call carries a deadline. Default connect timeout 2 s, read timeout 10 s.",
        "tags": ["http", "reliability", "latency"],
    },
    {
        "id": "oncall",
        "title": "On-call handbook",
        "body": "Acknowledge pages within 5 minutes. Escalate sev-1 incidents to the incident commander.",
        "tags": ["operations"],
    },
    {
        "id": "caching",
        "title": "Caching guidelines",
        "body": "Cache read-mostly data close to the reader; set explicit TTLs; never cache errors for long.",
        "tags": ["latency", "performance"],
    },
    {
        "id": "logging",
        "title": "Structured logging",
        "body": "Log JSON with a request id on every line. Never log secrets or tokens.",
        "tags": ["operations", "security"],
    },
]


def make_registry(*, latency: float = LATENCY) -> ToolRegistry:
    """A fresh tool set with its own in-memory docs and issues."""
    registry = ToolRegistry()
    docs = {doc["id"]: doc for doc in _DOCS}
    issues: dict[int, Issue] = {
        1: {
            "id": 1,
            "title": "Flaky retry test",
            "state": "open",
            "labels": ["bug", "http"],
            "comments": [],
        },
        2: {
            "id": 2,
            "title": "Document cache TTLs",
            "state": "open",
            "labels": ["docs"],
            "comments": [],
        },
        3: {
            "id": 3,
            "title": "Pager escalation is slow",
            "state": "closed",
            "labels": ["operations"],
            "comments": [{"author": "sam", "text": "Fixed by the new rota."}],
            "close_reason": "fixed",
        },
    }

    @registry.tool(concurrency_safe=True)
    async def search_docs(query: str, limit: int = 5, tag: str | None = None) -> list[DocHit]:
        """Full-text search over the team's engineering docs, best match first.

        Args:
            query: words to look for in titles and bodies.
            limit: at most this many hits.
            tag: only docs carrying this tag.
        """
        await anyio.sleep(latency)
        words = [w for w in query.lower().split() if w]
        hits: list[DocHit] = []
        for doc in docs.values():
            if tag is not None and tag not in doc["tags"]:
                continue
            text = f"{doc['title']} {doc['body']}".lower()
            score = sum(text.count(w) for w in words) + sum(2 for w in words if w in doc["tags"])
            if score:
                hits.append({"id": doc["id"], "title": doc["title"], "score": float(score)})
        hits.sort(key=lambda h: (-h["score"], h["id"]))
        return hits[: max(limit, 0)]

    @registry.tool(concurrency_safe=True)
    async def get_doc(doc_id: str) -> Doc:
        """Fetch one doc by id, with its full body.

        Args:
            doc_id: the id from a search hit.
        """
        await anyio.sleep(latency)
        doc = docs.get(doc_id)
        if doc is None:
            raise NotFoundError(f"no doc with id {doc_id!r}")
        return {
            "id": doc["id"],
            "title": doc["title"],
            "body": doc["body"],
            "tags": list(doc["tags"]),
        }

    @registry.tool(concurrency_safe=True)
    async def list_issues(
        state: Literal["open", "closed", "all"] = "open", label: str | None = None
    ) -> list[Issue]:
        """List tracker issues, oldest first.

        Args:
            state: which issues to list.
            label: only issues carrying this label.
        """
        await anyio.sleep(latency)
        return [
            _copy_issue(issue)
            for issue in sorted(issues.values(), key=lambda i: i["id"])
            if (state == "all" or issue["state"] == state)
            and (label is None or label in issue["labels"])
        ]

    @registry.tool(concurrency_safe=True)
    async def get_issue(issue_id: int) -> Issue:
        """Fetch one issue with its comments.

        Args:
            issue_id: the issue number.
        """
        await anyio.sleep(latency)
        return _copy_issue(_find(issues, issue_id))

    @registry.tool
    async def create_issue(title: str, body: str = "", labels: list[str] | None = None) -> Issue:
        """Open a new issue. Mutates the tracker.

        Args:
            title: a one-line summary.
            body: details, markdown allowed.
            labels: labels to attach.
        """
        if not title.strip():
            raise ToolError("the title must not be empty", code="INVALID_TITLE")
        issue_id = max(issues) + 1
        issue: Issue = {
            "id": issue_id,
            "title": title.strip(),
            "state": "open",
            "labels": sorted(set(labels or [])),
            "comments": [{"author": "agent", "text": body}] if body else [],
        }
        issues[issue_id] = issue
        return _copy_issue(issue)

    @registry.tool
    async def add_comment(issue_id: int, text: str) -> Comment:
        """Comment on an issue. Mutates the tracker.

        Args:
            issue_id: the issue number.
            text: the comment, markdown allowed.
        """
        comment: Comment = {"author": "agent", "text": text}
        _find(issues, issue_id)["comments"].append(comment)
        return dict(comment)  # type: ignore[return-value]

    @registry.tool
    async def close_issue(
        issue_id: int, reason: Literal["fixed", "duplicate", "wontfix"] = "fixed"
    ) -> Issue:
        """Close an open issue. Mutates the tracker.

        Args:
            issue_id: the issue number.
            reason: why it is closed.
        """
        issue = _find(issues, issue_id)
        if issue["state"] == "closed":
            raise ToolError(f"issue {issue_id} is already closed", code="ALREADY_CLOSED")
        issue["state"] = "closed"
        issue["close_reason"] = reason
        return _copy_issue(issue)

    return registry


def _find(issues: dict[int, Issue], issue_id: int) -> Issue:
    issue = issues.get(issue_id)
    if issue is None:
        raise NotFoundError(f"no issue #{issue_id}")
    return issue


def _copy_issue(issue: Issue) -> Issue:
    copied: Issue = {
        "id": issue["id"],
        "title": issue["title"],
        "state": issue["state"],
        "labels": list(issue["labels"]),
        "comments": [dict(c) for c in issue["comments"]],  # type: ignore[misc]
    }
    if "close_reason" in issue:
        copied["close_reason"] = issue["close_reason"]
    return copied


registry = make_registry()
