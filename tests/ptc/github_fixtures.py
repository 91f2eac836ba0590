"""The starting state of the fake GitHub of ``github_world``: repositories, issues, notifications.

Plain dicts, built fresh for every :class:`~tests.ptc.github_world.World`, in
the shapes the world's tool bodies read and change (not the API's shapes: the
bodies render those).
"""

from __future__ import annotations

import hashlib
from typing import Any

ME = "octo"
URL = "https://github.com"


def sha_of(text: str) -> str:
    """A stable 40-hex-digit id for ``text`` (a blob, a commit)."""
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


def user_json(login: str) -> dict[str, Any]:
    return {"login": login, "html_url": f"{URL}/{login}"}


def issue_record(
    number: int,
    title: str,
    user: str,
    updated: str,
    *,
    labels: tuple[str, ...] = (),
    state: str = "open",
    body: str = "",
    comments: tuple[tuple[str, str], ...] = (),
) -> dict[str, Any]:
    return {
        "number": number,
        "title": title,
        "body": body or f"{title}. Steps and details are in the thread.",
        "state": state,
        "state_reason": None if state == "open" else "completed",
        "user": user,
        "labels": list(labels),
        "assignees": [],
        "created_at": "2026-01-15T09:00:00Z",
        "updated_at": updated,
        "comments": [{"user": who, "body": text} for who, text in comments],
    }


def _pull(
    number: int,
    title: str,
    user: str,
    head: str,
    *,
    draft: bool = False,
    reviews: tuple[tuple[str, str], ...] = (),
    requested: tuple[str, ...] = (),
    files: tuple[tuple[str, int, int], ...] = (),
    state: str = "open",
    merged: bool = False,
) -> dict[str, Any]:
    return {
        "number": number,
        "title": title,
        "body": f"{title}.",
        "state": state,
        "draft": draft,
        "merged": merged,
        "mergeable": True,
        "user": user,
        "head": head,
        "base": "main",
        "requested_reviewers": list(requested),
        "reviews": [{"user": who, "state": verdict} for who, verdict in reviews],
        "files": [
            {"filename": name, "status": "modified", "additions": plus, "deletions": minus}
            for name, plus, minus in files
        ],
        "created_at": "2026-07-01T10:00:00Z",
        "updated_at": "2026-08-12T10:00:00Z",
    }


def commit(message: str, author: str, date: str) -> dict[str, Any]:
    return {
        "sha": sha_of(message + author + date),
        "message": message,
        "author": author,
        "date": date,
    }


def _alert(number: int, severity: str, package: str, state: str = "open") -> dict[str, Any]:
    return {"number": number, "state": state, "severity": severity, "package": package}


def initial_repos() -> dict[str, dict[str, Any]]:
    widgets_files = {
        "README.md": "# widgets\n\nComposable UI widgets.\n",
        "pyproject.toml": '[project]\nname = "widgets"\nversion = "1.2.0"\nrequires-python = ">=3.11"\n',
        "src/widgets/render.py": "def render(tree):\n    # TODO(security): validate input\n    return tree\n",
        "src/widgets/config.py": "def load(path):\n    return {}\n",
    }
    return {
        "acme/widgets": {
            "description": "Composable UI widgets for dashboards",
            "language": "Python",
            "stars": 412,
            "topics": ["ui", "widgets"],
            "issues": {
                1: issue_record(
                    1,
                    "Crash on startup with an empty config",
                    "alice",
                    "2026-05-02T08:00:00Z",
                    labels=("bug",),
                ),
                2: issue_record(
                    2, "Add a dark mode", "bob", "2026-07-20T08:00:00Z", labels=("enhancement",)
                ),
                3: issue_record(
                    3,
                    "Memory leak in the renderer",
                    "carol",
                    "2026-08-01T08:00:00Z",
                    labels=("bug", "performance"),
                    comments=(
                        ("alice", "Reproduced on 1.2.0."),
                        ("bob", "Heap grows by 2 MB a frame."),
                        ("carol", "Fix in #10."),
                    ),
                ),
                4: issue_record(
                    4,
                    "Typo in the install guide",
                    "dave",
                    "2026-03-01T08:00:00Z",
                    labels=("docs",),
                    state="closed",
                ),
                5: issue_record(
                    5,
                    "Crash when resizing the window",
                    "erin",
                    "2026-04-11T08:00:00Z",
                    labels=("bug",),
                ),
                6: issue_record(6, "Support Python 3.13", "alice", "2026-08-10T08:00:00Z"),
                7: issue_record(
                    7,
                    "Memory leaks when rendering charts",
                    "bob",
                    "2026-08-05T08:00:00Z",
                    labels=("bug",),
                ),
                8: issue_record(
                    8,
                    "Crash in the legacy exporter",
                    "dave",
                    "2026-02-01T08:00:00Z",
                    labels=("bug",),
                    state="closed",
                ),
            },
            "pulls": {
                9: _pull(9, "Bump dependencies", "dave", "deps", state="closed", merged=True),
                10: _pull(
                    10,
                    "Fix the renderer leak",
                    "carol",
                    "fix/leak",
                    reviews=(("alice", "APPROVED"),),
                    files=(("src/widgets/render.py", 12, 4), ("tests/test_render.py", 30, 0)),
                ),
                11: _pull(11, "Dark mode prototype", "bob", "dark-mode", draft=True),
                12: _pull(
                    12,
                    "Refactor the config loader",
                    "alice",
                    "config-loader",
                    reviews=(("bob", "CHANGES_REQUESTED"), ("carol", "APPROVED")),
                    files=(
                        ("src/widgets/config.py", 40, 22),
                        ("docs/config.md", 8, 1),
                        ("tests/test_config.py", 25, 3),
                    ),
                ),
            },
            "branches": {
                "main": True,
                "release/1.x": True,
                "fix/leak": False,
                "dark-mode": False,
                "config-loader": False,
            },
            "files": {"main": widgets_files},
            "commits": [
                commit("Render nested trees lazily", "alice", "2026-08-09T12:00:00Z"),
                commit("Cache theme lookups", "bob", "2026-07-30T12:00:00Z"),
                commit("Add the gauge widget", "alice", "2026-06-15T12:00:00Z"),
                commit("Release 1.2.0", "carol", "2026-07-01T12:00:00Z"),
                commit("Fix the legend overflow", "alice", "2026-05-20T12:00:00Z"),
                commit("Initial import", "bob", "2026-01-10T12:00:00Z"),
            ],
            "releases": [
                {
                    "tag_name": "v1.3.0-rc1",
                    "name": "1.3.0 release candidate",
                    "published_at": "2026-08-15T10:00:00Z",
                    "prerelease": True,
                    "body": "Lazy rendering preview.",
                },
                {
                    "tag_name": "v1.2.0",
                    "name": "1.2.0",
                    "published_at": "2026-07-01T10:00:00Z",
                    "prerelease": False,
                    "body": "Gauge widget; theme caching.",
                },
                {
                    "tag_name": "v1.1.0",
                    "name": "1.1.0",
                    "published_at": "2026-04-01T10:00:00Z",
                    "prerelease": False,
                    "body": "Legend overflow fixed; new palette API.",
                },
            ],
            "tags": ["v1.3.0-rc1", "v1.2.0", "v1.1.0", "v1.0.0"],
            "labels": {
                "bug": "d73a4a",
                "enhancement": "a2eeef",
                "docs": "0075ca",
                "performance": "fbca04",
            },
            "alerts": [
                _alert(1, "critical", "pyyaml"),
                _alert(2, "high", "urllib3"),
                _alert(3, "low", "idna"),
                _alert(4, "high", "jinja2", "fixed"),
            ],
            "runs": [
                {
                    "id": 501,
                    "name": "CI",
                    "head_branch": "main",
                    "status": "completed",
                    "conclusion": "success",
                },
                {
                    "id": 502,
                    "name": "CI",
                    "head_branch": "fix/leak",
                    "status": "completed",
                    "conclusion": "failure",
                },
                {
                    "id": 503,
                    "name": "Release",
                    "head_branch": "main",
                    "status": "completed",
                    "conclusion": "failure",
                },
                {
                    "id": 504,
                    "name": "CI",
                    "head_branch": "dark-mode",
                    "status": "in_progress",
                    "conclusion": None,
                },
            ],
            "collaborators": {
                "alice": "admin",
                "bob": "write",
                "carol": "maintain",
                "dave": "read",
                ME: "admin",
            },
        },
        "acme/gadgets": {
            "description": "Firmware and companion app for acme gadgets",
            "language": "C",
            "stars": 97,
            "topics": ["firmware", "bluetooth"],
            "issues": {
                1: issue_record(
                    1, "Bluetooth pairing fails on Android 15", "erin", "2026-08-02T08:00:00Z"
                ),
                2: issue_record(
                    2,
                    "Add USB-C power delivery",
                    "bob",
                    "2026-06-20T08:00:00Z",
                    labels=("enhancement",),
                ),
                3: issue_record(3, "Battery drains overnight", "carol", "2026-08-11T08:00:00Z"),
                4: issue_record(
                    4,
                    "Crash during a firmware update",
                    "dave",
                    "2026-03-03T08:00:00Z",
                    labels=("bug",),
                    state="closed",
                ),
            },
            "pulls": {
                5: _pull(5, "Add battery telemetry", "carol", "telemetry"),
                6: _pull(6, "WIP: new companion UI", "bob", "new-ui", draft=True),
                7: _pull(7, "Fix pairing retries", "erin", "fix/pairing", requested=("carol",)),
            },
            "branches": {"main": True, "telemetry": False, "new-ui": False, "fix/pairing": False},
            "files": {
                "main": {
                    "README.md": "# gadgets\n",
                    "package.json": '{"name": "gadgets-app", "version": "0.9.0"}\n',
                    "src/pair.c": "int pair(void) {\n  /* TODO(security): check the bond key */\n  return 0;\n}\n",
                }
            },
            "commits": [commit("Pairing retries", "erin", "2026-08-01T12:00:00Z")],
            "releases": [
                {
                    "tag_name": "v0.9.0",
                    "name": "0.9.0",
                    "published_at": "2026-06-10T10:00:00Z",
                    "prerelease": False,
                    "body": "Telemetry groundwork.",
                },
            ],
            "tags": ["v0.9.0"],
            "labels": {"bug": "d73a4a", "enhancement": "a2eeef"},
            "alerts": [
                _alert(1, "medium", "lodash"),
                _alert(2, "critical", "minimist", "dismissed"),
            ],
            "runs": [
                {
                    "id": 601,
                    "name": "Build",
                    "head_branch": "main",
                    "status": "completed",
                    "conclusion": "success",
                }
            ],
            "collaborators": {"bob": "write", "carol": "admin", ME: "write"},
        },
        "acme/docs": {
            "description": "The acme handbook and product docs",
            "language": "Markdown",
            "stars": 12,
            "topics": ["docs"],
            "issues": {
                1: issue_record(
                    1, "Update the README", "dave", "2026-08-01T08:00:00Z", labels=("docs",)
                )
            },
            "pulls": {},
            "branches": {"main": True},
            "files": {
                "main": {"README.md": "# Acme docs\n\nInstall teh package, then read teh guide.\n"}
            },
            "commits": [commit("Start the handbook", "dave", "2026-02-02T12:00:00Z")],
            "releases": [],
            "tags": [],
            "labels": {"docs": "0075ca"},
            "alerts": [],
            "runs": [],
            "collaborators": {"dave": "admin", ME: "write"},
        },
        f"{ME}/dotfiles": {
            "description": "My dotfiles",
            "language": "Shell",
            "stars": 3,
            "topics": [],
            "issues": {},
            "pulls": {},
            "branches": {"main": False},
            "files": {"main": {".bashrc": "export EDITOR=vim\n"}},
            "commits": [commit("Add bashrc", ME, "2026-01-01T12:00:00Z")],
            "releases": [],
            "tags": [],
            "labels": {},
            "alerts": [],
            "runs": [],
            "collaborators": {ME: "admin"},
        },
    }


def initial_notifications() -> list[dict[str, Any]]:
    rows = [
        ("1001", "acme/widgets", "PullRequest", "Fix the renderer leak", "review_requested"),
        ("1002", "acme/gadgets", "Issue", "Bluetooth pairing fails on Android 15", "mention"),
        ("1003", "acme/gadgets", "Release", "0.9.0", "subscribed"),
        ("1004", "acme/docs", "Issue", "Update the README", "assign"),
    ]
    return [
        {
            "id": ident,
            "repo": repo,
            "type": kind,
            "title": title,
            "reason": reason,
            "state": "unread",
        }
        for ident, repo, kind, title, reason in rows
    ]
