"""The tasks of the scripted GitHub suite (issue 19): goals, needs, program 2 and checks.

Each task's ``program`` is the second program the scripted model writes, from
the tool names it read in the first one's output (``t[role]``); its check holds
the answer against the fake GitHub of ``github_world`` and, after a mutation,
the world itself. The machinery that runs them is ``discovery_tasks``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.ptc.discovery_tasks import Need, Task
from tests.ptc.github_world import World

W = '"owner": "acme", "repo": "widgets"'
G = '"owner": "acme", "repo": "gadgets"'


def _equal(expected: Any) -> Callable[[Any, World], None]:
    def check(answer: Any, world: World) -> None:
        assert answer == expected, (answer, expected)

    return check


def _open_issue_numbers(
    world: World, key: str, keep: Callable[[dict[str, Any]], bool]
) -> list[int]:
    return [n for n, i in world.repos[key]["issues"].items() if i["state"] == "open" and keep(i)]


def _check_open_bugs(answer: Any, world: World) -> None:
    bugs = _open_issue_numbers(world, "acme/widgets", lambda i: "bug" in i["labels"])
    assert bugs == [1, 3, 5, 7]
    assert answer == {"open_bugs": len(bugs), "numbers": bugs}


def _check_merge(answer: Any, world: World) -> None:
    assert answer == [{"number": 10, "merged": True}]
    pulls = world.repos["acme/widgets"]["pulls"]
    assert pulls[10]["merged"] and pulls[10]["merge_method"] == "squash"
    assert not pulls[11]["merged"] and not pulls[12]["merged"]  # a draft; changes requested


def _check_stale(answer: Any, world: World) -> None:
    assert answer == [1, 5]
    issues = world.repos["acme/widgets"]["issues"]
    for number, issue in issues.items():
        mine = [c for c in issue["comments"] if c["user"] == "octo"]
        assert len(mine) == (1 if number in (1, 5) else 0), number


def _check_new_issue(answer: Any, world: World) -> None:
    assert answer == 8  # numbers follow the issues and pull requests 1-7
    issue = world.repos["acme/gadgets"]["issues"][8]
    assert issue["title"] == "Document the battery telemetry" and issue["user"] == "octo"
    assert "#5" in issue["body"]


def _check_duplicate(answer: Any, world: World) -> None:
    issue = world.repos["acme/widgets"]["issues"][7]
    assert answer == {"number": 7, "state": "closed"}
    assert issue["state"] == "closed" and issue["state_reason"] == "duplicate"
    assert issue["duplicate_of"] == 3
    assert world.repos["acme/widgets"]["issues"][3]["state"] == "open"


def _check_triage(answer: Any, world: World) -> None:
    assert answer == [1, 3]
    issues = world.repos["acme/gadgets"]["issues"]
    assert issues[1]["labels"] == issues[3]["labels"] == ["needs-triage"]
    assert issues[2]["labels"] == ["enhancement"]


def _check_typo(answer: Any, world: World) -> None:
    repo = world.repos["acme/docs"]
    assert answer["changed"] == 2 and len(answer["commit"]) == 7
    assert (
        repo["files"]["fix-typo"]["README.md"]
        == "# Acme docs\n\nInstall the package, then read the guide.\n"
    )
    assert "teh" in repo["files"]["main"]["README.md"]  # main is untouched
    assert repo["commits"][0]["message"] == "Fix typos in the README"


def _check_notifications(answer: Any, world: World) -> None:
    assert answer == ["1002", "1003"]
    states = {n["id"]: n["state"] for n in world.notifications}
    assert states == {"1001": "unread", "1002": "done", "1003": "done", "1004": "unread"}


def _check_stars(answer: Any, world: World) -> None:
    assert answer == ["acme/docs", "acme/gadgets"]
    assert sorted(world.starred) == ["acme/docs", "acme/gadgets", "acme/widgets"]


def _check_reviewers(answer: Any, world: World) -> None:
    assert answer == [5]
    pulls = world.repos["acme/gadgets"]["pulls"]
    assert pulls[5]["requested_reviewers"] == ["bob"]
    assert pulls[6]["requested_reviewers"] == [] and pulls[7]["requested_reviewers"] == ["carol"]


def _check_label(answer: Any, world: World) -> None:
    assert answer == "created"
    assert world.repos["acme/gadgets"]["labels"]["good first issue"] == "7057ff"


def _check_assign(answer: Any, world: World) -> None:
    assert answer == ["alice"]
    assert world.repos["acme/widgets"]["issues"][6]["assignees"] == ["alice"]


def _check_gist(answer: Any, world: World) -> None:
    (gist,) = world.gists
    assert answer == gist["html_url"] and not gist["public"]
    assert gist["files"] == {"README.md": world.repos["acme/docs"]["files"]["main"]["README.md"]}


REPOS = Need("repos", "search repositories", "search_repositories", ("query",))
ISSUES = Need("issues", "list issues", "list_issues", ("owner", "repo", "state", "OPEN"))
PULLS = Need("pulls", "list pull requests", "list_pull_requests", ("owner", "repo", "state"))
FILE = Need("file", "get file contents", "get_file_contents", ("path", "ref"))

TASKS: tuple[Task, ...] = (
    Task(
        "count-open-bugs",
        "How many open issues labelled bug are there in acme/widgets?",
        (Need("issues", "list issues with label", "list_issues", ("state", "labels", "OPEN")),),
        lambda t: (
            f'page = await tools.{t["issues"]}({{{W}, "state": "OPEN", "labels": ["bug"]}})\n'
            'return {"open_bugs": page["totalCount"], "numbers": [i["number"] for i in page["issues"]]}\n'
        ),
        _check_open_bugs,
    ),
    Task(
        "latest-release-per-repo",
        "What is the latest release tag of each acme repository?",
        (REPOS, Need("latest", "latest release", "get_latest_release", ("owner", "repo"))),
        lambda t: (
            "import asyncio\n"
            f'found = await tools.{t["repos"]}({{"query": "org:acme"}})\n'
            'names = [r["name"] for r in found["items"]]\n'
            "async def latest(name):\n"
            "    try:\n"
            f'        return (await tools.{t["latest"]}({{"owner": "acme", "repo": name}}))["tag_name"]\n'
            "    except ToolCallError as exc:\n"
            '        if exc.code == "NOT_FOUND":\n'
            "            return None\n"
            "        raise\n"
            "return dict(zip(names, await asyncio.gather(*(latest(n) for n in names))))\n"
        ),
        _equal({"docs": None, "gadgets": "v0.9.0", "widgets": "v1.2.0"}),
    ),
    Task(
        "merge-approved-pr",
        "Squash-merge the open pull request in acme/widgets that is approved and has no changes requested.",
        (
            PULLS,
            Need(
                "read",
                "get pull request reviews",
                "pull_request_read",
                ("method", "get_reviews", "pullNumber"),
            ),
            Need(
                "merge",
                "merge pull request",
                "merge_pull_request",
                ("pullNumber", "merge_method", "squash"),
            ),
        ),
        lambda t: (
            "import asyncio\n"
            f'pulls = await tools.{t["pulls"]}({{{W}, "state": "open"}})\n'
            'ready = [p["number"] for p in pulls if not p["draft"]]\n'
            "reviews = await asyncio.gather(*(\n"
            f'    tools.{t["read"]}({{"method": "get_reviews", {W}, "pullNumber": n}}) for n in ready\n'
            "))\n"
            "approved = [\n"
            "    n for n, rs in zip(ready, reviews)\n"
            '    if any(r["state"] == "APPROVED" for r in rs)\n'
            '    and not any(r["state"] == "CHANGES_REQUESTED" for r in rs)\n'
            "]\n"
            "merged = []\n"
            "for n in approved:\n"
            f'    out = await tools.{t["merge"]}({{{W}, "pullNumber": n, "merge_method": "squash"}})\n'
            '    merged.append({"number": n, "merged": out["merged"]})\n'
            "return merged\n"
        ),
        _check_merge,
    ),
    Task(
        "comment-on-stale-issues",
        "Comment on every open issue in acme/widgets not updated since 2026-06-01, asking for a status update.",
        (
            ISSUES,
            Need("comment", "comment on issue", "add_issue_comment", ("issue_number", "body")),
        ),
        lambda t: (
            f'page = await tools.{t["issues"]}({{{W}, "state": "OPEN"}})\n'
            'stale = [i["number"] for i in page["issues"] if i["updated_at"] < "2026-06-01"]\n'
            "for n in stale:\n"
            f'    await tools.{t["comment"]}({{{W}, "issue_number": n, "body": "Is this still happening on the latest release? Please confirm, or we will close it."}})\n'
            "return stale\n"
        ),
        _check_stale,
    ),
    Task(
        "file-an-issue",
        "Open an issue in acme/gadgets titled 'Document the battery telemetry' pointing at #5; give me its number.",
        (Need("create", "create issue", "create_issue", ("owner", "repo", "title", "body")),),
        lambda t: (
            f'made = await tools.{t["create"]}({{{G}, "title": "Document the battery telemetry", '
            '"body": "Describe the fields that #5 adds to the telemetry."})\n'
            'return made["number"]\n'
        ),
        _check_new_issue,
    ),
    Task(
        "close-as-duplicate",
        "Close acme/widgets#7 as a duplicate of #3.",
        (
            Need(
                "close",
                "close issue as duplicate",
                "update_issue_state",
                ("issue_number", "state", "state_reason", "duplicate", "duplicate_of"),
            ),
        ),
        lambda t: (
            f'out = await tools.{t["close"]}({{{W}, "issue_number": 7, "state": "closed", '
            '"state_reason": "duplicate", "duplicate_of": 3})\n'
            'return {"number": out["number"], "state": out["state"]}\n'
        ),
        _check_duplicate,
    ),
    Task(
        "label-untriaged-issues",
        "Label every open issue in acme/gadgets that has no label with needs-triage.",
        (
            ISSUES,
            Need("label", "set issue labels", "update_issue_labels", ("issue_number", "labels")),
        ),
        lambda t: (
            f'page = await tools.{t["issues"]}({{{G}, "state": "OPEN"}})\n'
            'bare = [i["number"] for i in page["issues"] if not i["labels"]]\n'
            "for n in bare:\n"
            f'    await tools.{t["label"]}({{{G}, "issue_number": n, "labels": ["needs-triage"]}})\n'
            "return bare\n"
        ),
        _check_triage,
    ),
    Task(
        "package-version",
        "Which version does acme/widgets declare in its pyproject.toml?",
        (FILE,),
        lambda t: (
            "import re\n"
            f'f = await tools.{t["file"]}({{{W}, "path": "pyproject.toml"}})\n'
            'return re.search(r\'^version = "([^"]+)"\', f["content"], re.M).group(1)\n'
        ),
        _equal("1.2.0"),
    ),
    Task(
        "commits-by-author",
        "How many commits did alice push to acme/widgets since June 2026, and what were they?",
        (Need("commits", "list commits by author", "list_commits", ("author", "since")),),
        lambda t: (
            f'rows = await tools.{t["commits"]}({{{W}, "author": "alice", "since": "2026-06-01T00:00:00Z"}})\n'
            'return {"count": len(rows), "messages": [r["commit"]["message"] for r in rows]}\n'
        ),
        _equal({"count": 2, "messages": ["Render nested trees lazily", "Add the gauge widget"]}),
    ),
    Task(
        "protected-branches",
        "Which branches of acme/widgets are protected?",
        (Need("branches", "list branches", "list_branches", ("owner", "repo")),),
        lambda t: (
            f'rows = await tools.{t["branches"]}({{{W}}})\nreturn [b["name"] for b in rows if b["protected"]]\n'
        ),
        _equal(["main", "release/1.x"]),
    ),
    Task(
        "fix-typo-on-a-branch",
        "In acme/docs, make a branch fix-typo and commit there a README.md with 'teh' corrected to 'the'.",
        (
            Need("branch", "create branch", "create_branch", ("branch", "from_branch")),
            FILE,
            Need(
                "put",
                "create or update file",
                "create_or_update_file",
                ("path", "content", "message", "branch", "sha"),
            ),
        ),
        lambda t: (
            f'await tools.{t["branch"]}({{"owner": "acme", "repo": "docs", "branch": "fix-typo", "from_branch": "main"}})\n'
            f'f = await tools.{t["file"]}({{"owner": "acme", "repo": "docs", "path": "README.md", "ref": "refs/heads/fix-typo"}})\n'
            f'out = await tools.{t["put"]}({{"owner": "acme", "repo": "docs", "path": "README.md", "branch": "fix-typo", '
            '"content": f["content"].replace("teh", "the"), "message": "Fix typos in the README", "sha": f["sha"]})\n'
            'return {"commit": out["commit"]["sha"][:7], "changed": f["content"].count("teh")}\n'
        ),
        _check_typo,
    ),
    Task(
        "dismiss-repo-notifications",
        "Mark all my notifications from acme/gadgets as done.",
        (
            Need("list", "list notifications", "list_notifications", ("owner", "repo")),
            Need(
                "dismiss",
                "dismiss notification mark done",
                "dismiss_notification",
                ("threadID", "state", "done"),
            ),
        ),
        lambda t: (
            f"rows = await tools.{t['list']}({{{G}}})\n"
            "for n in rows:\n"
            f'    await tools.{t["dismiss"]}({{"threadID": n["id"], "state": "done"}})\n'
            'return [n["id"] for n in rows]\n'
        ),
        _check_notifications,
    ),
    Task(
        "star-the-org",
        "Star every acme repository I have not starred yet.",
        (
            REPOS,
            Need("starred", "starred repositories", "list_starred_repositories", ()),
            Need("star", "star repository", "star_repository", ("owner", "repo")),
        ),
        lambda t: (
            "import asyncio\n"
            f'found, mine = await asyncio.gather(tools.{t["repos"]}({{"query": "org:acme"}}), tools.{t["starred"]}({{}}))\n'
            'have = {r["full_name"] for r in mine}\n'
            'todo = [r["full_name"] for r in found["items"] if r["full_name"] not in have]\n'
            "for full in todo:\n"
            '    owner, name = full.split("/")\n'
            f'    await tools.{t["star"]}({{"owner": owner, "repo": name}})\n'
            "return todo\n"
        ),
        _check_stars,
    ),
    Task(
        "severe-dependabot-alerts",
        "How many open critical or high dependabot alerts does each acme repository have?",
        (
            REPOS,
            Need(
                "alerts", "dependabot alerts", "list_dependabot_alerts", ("owner", "repo", "state")
            ),
        ),
        lambda t: (
            "import asyncio\n"
            f'found = await tools.{t["repos"]}({{"query": "org:acme"}})\n'
            'names = [r["name"] for r in found["items"]]\n'
            f'alerts = await asyncio.gather(*(tools.{t["alerts"]}({{"owner": "acme", "repo": n, "state": "open"}}) for n in names))\n'
            "return {\n"
            '    n: sum(a["security_advisory"]["severity"] in ("critical", "high") for a in rows)\n'
            "    for n, rows in zip(names, alerts)\n"
            "}\n"
        ),
        _equal({"docs": 0, "gadgets": 0, "widgets": 2}),
    ),
    Task(
        "failed-workflow-runs",
        "Which workflow runs failed in acme/widgets, on which branch?",
        (Need("runs", "failed workflow runs", "actions_list", ("method", "list_workflow_runs")),),
        lambda t: (
            f'out = await tools.{t["runs"]}({{"method": "list_workflow_runs", {W}}})\n'
            'return [{"id": r["id"], "workflow": r["name"], "branch": r["head_branch"]}\n'
            '        for r in out["workflow_runs"] if r["conclusion"] == "failure"]\n'
        ),
        _equal(
            [
                {"id": 502, "workflow": "CI", "branch": "fix/leak"},
                {"id": 503, "workflow": "Release", "branch": "main"},
            ]
        ),
    ),
    Task(
        "files-of-a-pr",
        "Which files does acme/widgets#12 change, and how many lines in all?",
        (
            Need(
                "read",
                "files changed in pull request",
                "pull_request_read",
                ("method", "get_files", "pullNumber"),
            ),
        ),
        lambda t: (
            f'files = await tools.{t["read"]}({{"method": "get_files", {W}, "pullNumber": 12}})\n'
            'return {"files": [f["filename"] for f in files], "lines": sum(f["additions"] + f["deletions"] for f in files)}\n'
        ),
        _equal(
            {
                "files": ["src/widgets/config.py", "docs/config.md", "tests/test_config.py"],
                "lines": 99,
            }
        ),
    ),
    Task(
        "request-missing-reviews",
        "Ask bob to review every open, non-draft pull request in acme/gadgets that has no reviewer requested.",
        (
            PULLS,
            Need(
                "request",
                "request reviewers pull request",
                "request_pull_request_reviewers",
                ("pullNumber", "reviewers"),
            ),
        ),
        lambda t: (
            f'pulls = await tools.{t["pulls"]}({{{G}, "state": "open"}})\n'
            'todo = [p["number"] for p in pulls if not p["draft"] and not p["requested_reviewers"]]\n'
            "for n in todo:\n"
            f'    await tools.{t["request"]}({{{G}, "pullNumber": n, "reviewers": ["bob"]}})\n'
            "return todo\n"
        ),
        _check_reviewers,
    ),
    Task(
        "security-todos",
        "Where in the acme repositories is there a TODO(security) comment?",
        (Need("code", "search code", "search_code", ("query",)),),
        lambda t: (
            f'out = await tools.{t["code"]}({{"query": "\\"TODO(security)\\" org:acme"}})\n'
            'return sorted(f\'{i["repository"]["full_name"]}:{i["path"]}\' for i in out["items"])\n'
        ),
        _equal(["acme/gadgets:src/pair.c", "acme/widgets:src/widgets/render.py"]),
    ),
    Task(
        "who-am-i",
        "Who am I on GitHub, and which teams am I in?",
        (
            Need("me", "authenticated user", "get_me", ()),
            Need("teams", "my teams", "get_teams", ()),
        ),
        lambda t: (
            "import asyncio\n"
            f"me, teams = await asyncio.gather(tools.{t['me']}({{}}), tools.{t['teams']}({{}}))\n"
            'return {"login": me["login"], "teams": [f\'{o["org"]}/{x["slug"]}\' for o in teams for x in o["teams"]]}\n'
        ),
        _equal({"login": "octo", "teams": ["acme/core", "acme/docs-team"]}),
    ),
    Task(
        "release-notes",
        "What do the release notes of acme/widgets v1.1.0 say?",
        (Need("release", "release by tag", "get_release_by_tag", ("tag",)),),
        lambda t: f'r = await tools.{t["release"]}({{{W}, "tag": "v1.1.0"}})\nreturn r["body"]\n',
        _equal("Legend overflow fixed; new palette API."),
    ),
    Task(
        "repo-admins",
        "Who has admin rights on acme/widgets?",
        (
            Need(
                "people",
                "repository collaborators permissions",
                "list_repository_collaborators",
                ("owner", "repo"),
            ),
        ),
        lambda t: (
            f"out = await tools.{t['people']}({{{W}}})\n"
            'return [c["login"] for c in out["collaborators"] if c["permissions"]["admin"]]\n'
        ),
        _equal(["alice", "octo"]),
    ),
    Task(
        "issue-commenters",
        "Who has commented on acme/widgets#3?",
        (Need("read", "issue comments", "issue_read", ("method", "get_comments", "issue_number")),),
        lambda t: (
            f'rows = await tools.{t["read"]}({{"method": "get_comments", {W}, "issue_number": 3}})\n'
            'return sorted({r["user"]["login"] for r in rows})\n'
        ),
        _equal(["alice", "bob", "carol"]),
    ),
    Task(
        "tags-without-release",
        "Which tags of acme/widgets have no release?",
        (
            Need("tags", "list tags", "list_tags", ("owner", "repo")),
            Need("releases", "list releases", "list_releases", ("owner", "repo")),
        ),
        lambda t: (
            "import asyncio\n"
            f"tags, releases = await asyncio.gather(tools.{t['tags']}({{{W}}}), tools.{t['releases']}({{{W}}}))\n"
            'released = {r["tag_name"] for r in releases}\n'
            'return [x["name"] for x in tags if x["name"] not in released]\n'
        ),
        _equal(["v1.0.0"]),
    ),
    Task(
        "label-if-missing",
        "Make sure acme/gadgets has a 'good first issue' label (colour 7057ff).",
        (
            Need("labels", "list labels", "list_label", ("owner", "repo")),
            Need("write", "create label", "label_write", ("method", "create", "name", "color")),
        ),
        lambda t: (
            f"have = await tools.{t['labels']}({{{G}}})\n"
            'if any(x["name"] == "good first issue" for x in have["labels"]):\n'
            '    return "exists"\n'
            f'await tools.{t["write"]}({{"method": "create", {G}, "name": "good first issue", "color": "7057ff", '
            '"description": "Good for newcomers"})\n'
            'return "created"\n'
        ),
        _check_label,
    ),
    Task(
        "open-crash-reports",
        "Which open issues across the acme organization report a crash?",
        (Need("search", "search issues", "search_issues", ("query",)),),
        lambda t: (
            f'out = await tools.{t["search"]}({{"query": "crash is:open org:acme"}})\n'
            'return sorted(f\'{i["repository"]}#{i["number"]}\' for i in out["items"])\n'
        ),
        _equal(["acme/widgets#1", "acme/widgets#5"]),
    ),
    Task(
        "assign-an-issue",
        "Assign acme/widgets#6 to alice.",
        (Need("assign", "assign issue", "update_issue_assignees", ("issue_number", "assignees")),),
        lambda t: (
            f'out = await tools.{t["assign"]}({{{W}, "issue_number": 6, "assignees": ["alice"]}})\n'
            'return [a["login"] for a in out["assignees"]]\n'
        ),
        _check_assign,
    ),
    Task(
        "readme-to-gist",
        "Put the README of acme/docs in a secret gist and give me its link.",
        (FILE, Need("gist", "create gist", "create_gist", ("filename", "content", "public"))),
        lambda t: (
            f'f = await tools.{t["file"]}({{"owner": "acme", "repo": "docs", "path": "README.md"}})\n'
            f'g = await tools.{t["gist"]}({{"filename": "README.md", "content": f["content"], '
            '"description": "acme/docs README", "public": False})\n'
            'return g["html_url"]\n'
        ),
        _check_gist,
    ),
)

#: Other phrasings a model could as well have written, with the tools that would
#: do: the benchmark reports the rank of the first of them (``-``: not in the hits).
PROBES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("pull request reviews", ("pull_request_read",)),
    ("reviews of a pull request", ("pull_request_read",)),
    ("list repositories of an organization", ("search_repositories",)),
    ("list repositories in organization", ("search_repositories",)),
    ("commit file change to branch", ("create_or_update_file", "push_files")),
    ("close issue", ("update_issue_state", "issue_write")),
    ("close pull request", ("update_pull_request_state", "update_pull_request")),
    ("workflow runs", ("actions_list",)),
    ("list open issues", ("list_issues",)),
)
