"""A fake GitHub behind the 117 real tool schemas of the GitHub MCP server (a test helper).

:func:`github_registry` registers every tool of ``tests/data/github-mcp-server.json``
with its real input schema (so the registry's validation is the real one), the
output schema a mounted MCP tool without one gets (``registry.MCP_OUTPUT``), and
a body that answers from a :class:`World`: a deterministic, in-memory GitHub of a
few repositories with their issues, pull requests, reviews, commits, branches,
files, releases, tags, labels, alerts, workflow runs, collaborators, plus the
user's notifications, stars, teams and gists. The tools the task suite uses
answer from it in the shapes the real server returns (trimmed to plausible
fields); mutating tools change it; every other tool answers a small generic
fixture. Read-only tools (``readOnlyHint``) are concurrency-safe, the others not.
Every body call is logged in :attr:`World.calls` (name, arguments, value or
error), which is what the native-tools accounting replays.
"""

from __future__ import annotations

import copy
import fnmatch
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from registry import (
    MCP_OUTPUT,
    ToolAnnotations,
    ToolDefinition,
    ToolError,
    ToolOutput,
    ToolRegistry,
    ToolRunContext,
)
from tests.ptc.github_fixtures import (
    ME,
    URL,
    commit,
    initial_notifications,
    initial_repos,
    issue_record,
    sha_of,
    user_json,
)

CORPUS = Path(__file__).resolve().parents[1] / "data" / "github-mcp-server.json"


def load_corpus() -> list[dict[str, Any]]:
    """The 117 tool entries (name, description, inputSchema, annotations)."""
    tools: list[dict[str, Any]] = json.loads(CORPUS.read_text(encoding="utf-8"))
    return tools


class NotFound(ToolError):
    code = "NOT_FOUND"


class Conflict(ToolError):
    code = "CONFLICT"


@dataclass
class Call:
    """One tool body call: what the model would have sent and read natively."""

    name: str
    args: dict[str, Any]
    value: Any = None
    error: str | None = None


@dataclass
class World:
    """The fake GitHub: repositories by ``owner/name`` and the user's own things."""

    repos: dict[str, dict[str, Any]] = field(default_factory=initial_repos)
    notifications: list[dict[str, Any]] = field(default_factory=initial_notifications)
    starred: list[str] = field(default_factory=lambda: ["acme/widgets"])
    teams: dict[str, list[str]] = field(default_factory=lambda: {"acme": ["core", "docs-team"]})
    gists: list[dict[str, Any]] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)

    # ------------------------------------------------------------------ helpers

    def repo(self, args: dict[str, Any]) -> dict[str, Any]:
        key = f"{args['owner']}/{args['repo']}"
        found = self.repos.get(key)
        if found is None:
            raise NotFound(f"repository {key} not found")
        return found

    def issue(self, args: dict[str, Any], number: Any = None) -> dict[str, Any]:
        repo = self.repo(args)
        wanted = int(args["issue_number"] if number is None else number)
        found = repo["issues"].get(wanted)
        if found is None:
            raise NotFound(f"issue #{wanted} not found in {args['owner']}/{args['repo']}")
        return found  # type: ignore[no-any-return]

    def pull(self, args: dict[str, Any]) -> dict[str, Any]:
        repo = self.repo(args)
        found = repo["pulls"].get(int(args["pullNumber"]))
        if found is None:
            raise NotFound(f"pull request #{args['pullNumber']} not found")
        return found  # type: ignore[no-any-return]

    def repo_json(self, key: str) -> dict[str, Any]:
        repo = self.repos[key]
        owner, name = key.split("/")
        return {
            "name": name,
            "full_name": key,
            "owner": owner,
            "description": repo["description"],
            "html_url": f"{URL}/{key}",
            "language": repo["language"],
            "stargazers_count": repo["stars"],
            "open_issues_count": sum(1 for i in repo["issues"].values() if i["state"] == "open"),
            "topics": repo["topics"],
            "default_branch": "main",
            "private": False,
            "updated_at": "2026-08-12T10:00:00Z",
        }

    def issue_json(self, key: str, issue: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in issue.items() if k != "comments"}
        out["user"] = user_json(issue["user"])
        out["labels"] = [{"name": name} for name in issue["labels"]]
        out["assignees"] = [user_json(a) for a in issue["assignees"]]
        out["comments"] = len(issue["comments"])
        out["html_url"] = f"{URL}/{key}/issues/{issue['number']}"
        return out

    def pull_json(self, key: str, pull: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in pull.items() if k not in ("reviews", "files")}
        out["user"] = user_json(pull["user"])
        out["head"] = {"ref": pull["head"], "label": f"{key.split('/')[0]}:{pull['head']}"}
        out["base"] = {"ref": pull["base"]}
        out["requested_reviewers"] = [user_json(r) for r in pull["requested_reviewers"]]
        out["html_url"] = f"{URL}/{key}/pull/{pull['number']}"
        return out

    def release_json(self, key: str, release: dict[str, Any]) -> dict[str, Any]:
        return {
            **release,
            "draft": False,
            "html_url": f"{URL}/{key}/releases/tag/{release['tag_name']}",
            "author": user_json("carol"),
        }

    def _files(self, args: dict[str, Any], branch: str) -> dict[str, str]:
        files = self.repo(args)["files"].get(branch)
        if files is None:
            raise NotFound(f"branch {branch} not found")
        return files  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ repositories

    def search_repositories(self, args: dict[str, Any]) -> Any:
        words = args["query"].split()
        owners = {w.split(":", 1)[1] for w in words if w.startswith(("org:", "user:"))}
        plain = [w.lower() for w in words if ":" not in w]
        items = []
        for key in sorted(self.repos):
            owner = key.split("/")[0]
            text = f"{key} {self.repos[key]['description']}".lower()
            if (not owners or owner in owners) and all(w in text for w in plain):
                items.append(self.repo_json(key))
        return {"total_count": len(items), "incomplete_results": False, "items": items}

    def list_starred_repositories(self, args: dict[str, Any]) -> Any:
        return [self.repo_json(key) for key in self.starred]

    def star_repository(self, args: dict[str, Any]) -> Any:
        key = f"{args['owner']}/{args['repo']}"
        self.repo(args)
        if key not in self.starred:
            self.starred.append(key)
        return f"Successfully starred repository {key}"

    def list_repository_collaborators(self, args: dict[str, Any]) -> Any:
        roles = ("read", "triage", "write", "maintain", "admin")
        rows = []
        for login, role in sorted(self.repo(args)["collaborators"].items()):
            rank = roles.index(role)
            permissions = {
                "pull": True,
                "triage": rank >= 1,
                "push": rank >= 2,
                "maintain": rank >= 3,
                "admin": rank >= 4,
            }
            rows.append({**user_json(login), "role_name": role, "permissions": permissions})
        return {"collaborators": rows, "nextPage": None, "lastPage": 1}

    def get_file_contents(self, args: dict[str, Any]) -> Any:
        ref = args.get("ref", "refs/heads/main").removeprefix("refs/heads/")
        files = self._files(args, ref)
        path = args.get("path", "/").strip("/")
        if path in files:
            return {
                "type": "file",
                "name": path.rsplit("/", 1)[-1],
                "path": path,
                "sha": sha_of(files[path]),
                "size": len(files[path]),
                "content": files[path],
            }
        entries = sorted(
            {p[len(path) :].lstrip("/").split("/")[0] for p in files if p.startswith(path)}
        )
        if not entries:
            raise NotFound(f"path {path!r} not found on {ref}")
        return [{"type": "file", "name": e, "path": f"{path}/{e}".lstrip("/")} for e in entries]

    def create_or_update_file(self, args: dict[str, Any]) -> Any:
        files = self._files(args, args["branch"])
        path = args["path"]
        if path in files and args.get("sha") != sha_of(files[path]):
            raise Conflict(f"{path} does not match the sha given: get the file's current sha first")
        files[path] = args["content"]
        made = commit(args["message"], ME, "2026-08-20T12:00:00Z")
        self.repo(args)["commits"].insert(0, made)
        return {
            "content": {"path": path, "sha": sha_of(args["content"])},
            "commit": {"sha": made["sha"], "message": args["message"]},
        }

    def list_branches(self, args: dict[str, Any]) -> Any:
        repo = self.repo(args)
        return [
            {"name": name, "commit": {"sha": sha_of(f"{name}-head")}, "protected": protected}
            for name, protected in repo["branches"].items()
        ]

    def create_branch(self, args: dict[str, Any]) -> Any:
        repo = self.repo(args)
        source = args.get("from_branch", "main")
        if args["branch"] in repo["branches"]:
            raise Conflict(f"branch {args['branch']} already exists")
        files = self._files(args, source)
        repo["branches"][args["branch"]] = False
        repo["files"][args["branch"]] = dict(files)
        return {"ref": f"refs/heads/{args['branch']}", "object": {"sha": sha_of(f"{source}-head")}}

    def list_commits(self, args: dict[str, Any]) -> Any:
        rows = []
        for c in self.repo(args)["commits"]:
            if "author" in args and c["author"] != args["author"]:
                continue
            if "since" in args and c["date"] < args["since"]:
                continue
            rows.append(
                {
                    "sha": c["sha"],
                    "html_url": f"{URL}/{args['owner']}/{args['repo']}/commit/{c['sha']}",
                    "commit": {
                        "message": c["message"],
                        "author": {"name": c["author"], "date": c["date"]},
                    },
                    "author": user_json(c["author"]),
                }
            )
        return rows

    def search_code(self, args: dict[str, Any]) -> Any:
        needle = args["query"].replace('"', "")
        owners = {w.split(":", 1)[1] for w in needle.split() if w.startswith(("org:", "user:"))}
        needle = " ".join(w for w in needle.split() if ":" not in w)
        items = []
        for key in sorted(self.repos):
            if owners and key.split("/")[0] not in owners:
                continue
            for path, text in sorted(self.repos[key]["files"]["main"].items()):
                if needle in text:
                    items.append(
                        {
                            "name": path.rsplit("/", 1)[-1],
                            "path": path,
                            "sha": sha_of(text),
                            "repository": {"full_name": key},
                            "html_url": f"{URL}/{key}/blob/main/{path}",
                        }
                    )
        return {"total_count": len(items), "incomplete_results": False, "items": items}

    # ------------------------------------------------------------------ releases and tags

    def get_latest_release(self, args: dict[str, Any]) -> Any:
        key = f"{args['owner']}/{args['repo']}"
        for release in self.repo(args)["releases"]:
            if not release["prerelease"]:
                return self.release_json(key, release)
        raise NotFound(f"no release found in {key}")

    def get_release_by_tag(self, args: dict[str, Any]) -> Any:
        key = f"{args['owner']}/{args['repo']}"
        for release in self.repo(args)["releases"]:
            if release["tag_name"] == args["tag"]:
                return self.release_json(key, release)
        raise NotFound(f"no release with tag {args['tag']} in {key}")

    def list_releases(self, args: dict[str, Any]) -> Any:
        key = f"{args['owner']}/{args['repo']}"
        return [self.release_json(key, r) for r in self.repo(args)["releases"]]

    def list_tags(self, args: dict[str, Any]) -> Any:
        return [{"name": tag, "commit": {"sha": sha_of(tag)}} for tag in self.repo(args)["tags"]]

    # ------------------------------------------------------------------ issues

    def list_issues(self, args: dict[str, Any]) -> Any:
        key = f"{args['owner']}/{args['repo']}"
        rows = []
        for issue in self.repo(args)["issues"].values():
            if "state" in args and issue["state"] != args["state"].lower():
                continue
            if any(label not in issue["labels"] for label in args.get("labels", [])):
                continue
            if "since" in args and issue["updated_at"] < args["since"]:
                continue
            row = self.issue_json(key, issue)
            if "fields" in args:
                row = {k: v for k, v in row.items() if k in args["fields"]}
            rows.append(row)
        return {
            "issues": rows,
            "pageInfo": {"hasNextPage": False, "endCursor": None},
            "totalCount": len(rows),
        }

    def search_issues(self, args: dict[str, Any]) -> Any:
        words = args["query"].lower().split()
        state = next(
            (w.split(":")[1] for w in words if w.startswith(("is:open", "is:closed", "state:"))),
            None,
        )
        owners = {w.split(":", 1)[1] for w in words if w.startswith(("org:", "user:"))}
        repos = {w.split(":", 1)[1] for w in words if w.startswith("repo:")}
        if "owner" in args and "repo" in args:
            repos.add(f"{args['owner']}/{args['repo']}".lower())
        plain = [w for w in words if ":" not in w]
        items = []
        for key in sorted(self.repos):
            if (owners and key.split("/")[0] not in owners) or (repos and key.lower() not in repos):
                continue
            for issue in self.repos[key]["issues"].values():
                text = f"{issue['title']} {issue['body']}".lower()
                if state and issue["state"] != state:
                    continue
                if plain and not any(w.removesuffix("es") in text for w in plain):
                    continue
                items.append({**self.issue_json(key, issue), "repository": key})
        return {"total_count": len(items), "incomplete_results": False, "items": items}

    def issue_read(self, args: dict[str, Any]) -> Any:
        key = f"{args['owner']}/{args['repo']}"
        issue = self.issue(args)
        if args["method"] == "get_comments":
            return [
                {
                    "id": 9000 + i,
                    "user": user_json(c["user"]),
                    "body": c["body"],
                    "created_at": "2026-08-01T09:00:00Z",
                }
                for i, c in enumerate(issue["comments"])
            ]
        if args["method"] == "get_labels":
            return [{"name": n, "color": self.repo(args)["labels"].get(n)} for n in issue["labels"]]
        return self.issue_json(key, issue)

    def create_issue(self, args: dict[str, Any]) -> Any:
        repo = self.repo(args)
        number = max([*repo["issues"], *repo["pulls"], 0]) + 1
        issue = issue_record(
            number, args["title"], ME, "2026-08-20T12:00:00Z", body=args.get("body", "")
        )
        if not args.get("body"):
            issue["body"] = ""
        issue["labels"] = list(args.get("labels", []))
        issue["assignees"] = list(args.get("assignees", []))
        repo["issues"][number] = issue
        return {
            "id": 70000 + number,
            "number": number,
            "url": f"{URL}/{args['owner']}/{args['repo']}/issues/{number}",
        }

    def issue_write(self, args: dict[str, Any]) -> Any:
        if args["method"] == "create":
            if "title" not in args:
                raise ToolError("title is required to create an issue", code="INVALID_ARGS")
            return self.create_issue(args)
        if "issue_number" not in args:
            raise ToolError("issue_number is required to update an issue", code="INVALID_ARGS")
        issue = self.issue(args)
        for name in ("title", "body", "labels", "assignees", "state", "state_reason"):
            if name in args:
                issue[name] = copy.deepcopy(args[name])
        if "state" in args and "state_reason" not in args:
            issue["state_reason"] = None if args["state"] == "open" else "completed"
        if "duplicate_of" in args:
            issue["duplicate_of"] = int(args["duplicate_of"])
        issue["updated_at"] = "2026-08-20T12:00:00Z"
        return {
            "id": 70000 + issue["number"],
            "number": issue["number"],
            "url": f"{URL}/{args['owner']}/{args['repo']}/issues/{issue['number']}",
        }

    def update_issue_state(self, args: dict[str, Any]) -> Any:
        issue = self.issue(args)
        if args.get("state_reason") == "duplicate":
            if "duplicate_of" not in args:
                raise ToolError(
                    "duplicate_of is required when state_reason is 'duplicate'", code="INVALID_ARGS"
                )
            self.issue(args, args["duplicate_of"])  # the canonical issue must exist
            issue["duplicate_of"] = int(args["duplicate_of"])
        issue["state"] = args["state"]
        issue["state_reason"] = args.get(
            "state_reason", None if args["state"] == "open" else "completed"
        )
        issue["updated_at"] = "2026-08-20T12:00:00Z"
        return self.issue_json(f"{args['owner']}/{args['repo']}", issue)

    def update_issue_labels(self, args: dict[str, Any]) -> Any:
        issue = self.issue(args)
        issue["labels"] = [x if isinstance(x, str) else x["value"] for x in args["labels"]]
        issue["updated_at"] = "2026-08-20T12:00:00Z"
        return self.issue_json(f"{args['owner']}/{args['repo']}", issue)

    def update_issue_assignees(self, args: dict[str, Any]) -> Any:
        issue = self.issue(args)
        issue["assignees"] = [x if isinstance(x, str) else x["value"] for x in args["assignees"]]
        return self.issue_json(f"{args['owner']}/{args['repo']}", issue)

    def add_issue_comment(self, args: dict[str, Any]) -> Any:
        repo = self.repo(args)
        number = int(args["issue_number"])
        target = repo["issues"].get(number) or repo["pulls"].get(number)
        if target is None:
            raise NotFound(f"issue #{number} not found")
        if "body" not in args:
            raise ToolError(
                "this fake backend takes comments with a body only", code="INVALID_ARGS"
            )
        target.setdefault("comments", []).append({"user": ME, "body": args["body"]})
        target["updated_at"] = "2026-08-20T12:00:00Z"
        ident = 90000 + len(target["comments"])
        return {
            "id": ident,
            "body": args["body"],
            "html_url": f"{URL}/{args['owner']}/{args['repo']}/issues/{number}#issuecomment-{ident}",
        }

    def list_label(self, args: dict[str, Any]) -> Any:
        labels = self.repo(args)["labels"]
        return {
            "labels": [{"name": n, "color": c} for n, c in labels.items()],
            "totalCount": len(labels),
        }

    def get_label(self, args: dict[str, Any]) -> Any:
        color = self.repo(args)["labels"].get(args["name"])
        if color is None:
            raise NotFound(f"label {args['name']!r} not found")
        return {"name": args["name"], "color": color}

    def label_write(self, args: dict[str, Any]) -> Any:
        labels = self.repo(args)["labels"]
        name = args["name"]
        if args["method"] == "create":
            if name in labels:
                raise Conflict(f"label {name!r} already exists")
            if "color" not in args:
                raise ToolError("color is required to create a label", code="INVALID_ARGS")
            labels[name] = args["color"]
        elif args["method"] == "delete":
            labels.pop(name, None)
        else:
            labels[args.get("new_name", name)] = args.get("color", labels.pop(name, "ededed"))
        return {"name": args.get("new_name", name), "method": args["method"]}

    # ------------------------------------------------------------------ pull requests

    def list_pull_requests(self, args: dict[str, Any]) -> Any:
        key = f"{args['owner']}/{args['repo']}"
        wanted = args.get("state", "open")
        rows = []
        for pull in self.repo(args)["pulls"].values():
            if wanted != "all" and pull["state"] != wanted:
                continue
            row = self.pull_json(key, pull)
            if "fields" in args:
                row = {k: v for k, v in row.items() if k in args["fields"]}
            rows.append(row)
        return rows

    def pull_request_read(self, args: dict[str, Any]) -> Any:
        pull = self.pull(args)
        method = args["method"]
        if method == "get_reviews":
            return [
                {
                    "id": 800 + i,
                    "user": user_json(r["user"]),
                    "state": r["state"],
                    "submitted_at": "2026-08-10T10:00:00Z",
                }
                for i, r in enumerate(pull["reviews"])
            ]
        if method == "get_files":
            return copy.deepcopy(pull["files"])
        if method == "get":
            return self.pull_json(f"{args['owner']}/{args['repo']}", pull)
        return {"message": f"pull_request_read {method}: no fixture for this method"}

    def merge_pull_request(self, args: dict[str, Any]) -> Any:
        pull = self.pull(args)
        if pull["state"] != "open" or pull["draft"]:
            raise ToolError(
                f"pull request #{pull['number']} is not mergeable", code="NOT_MERGEABLE"
            )
        pull.update(state="closed", merged=True, merge_method=args.get("merge_method", "merge"))
        return {
            "merged": True,
            "message": "Pull Request successfully merged",
            "sha": sha_of(pull["title"]),
        }

    def request_pull_request_reviewers(self, args: dict[str, Any]) -> Any:
        pull = self.pull(args)
        for login in args["reviewers"]:
            if login not in pull["requested_reviewers"]:
                pull["requested_reviewers"].append(login)
        return self.pull_json(f"{args['owner']}/{args['repo']}", pull)

    def update_pull_request_state(self, args: dict[str, Any]) -> Any:
        pull = self.pull(args)
        pull["state"] = args["state"]
        return self.pull_json(f"{args['owner']}/{args['repo']}", pull)

    # ------------------------------------------------------------------ security and actions

    def list_dependabot_alerts(self, args: dict[str, Any]) -> Any:
        key = f"{args['owner']}/{args['repo']}"
        state = args.get("state", "open")
        return [
            {
                "number": a["number"],
                "state": a["state"],
                "dependency": {
                    "package": {"name": a["package"], "ecosystem": "pip"},
                    "manifest_path": "requirements.txt",
                },
                "security_advisory": {
                    "severity": a["severity"],
                    "summary": f"Vulnerability in {a['package']}",
                },
                "html_url": f"{URL}/{key}/security/dependabot/{a['number']}",
            }
            for a in self.repo(args)["alerts"]
            if a["state"] == state and args.get("severity", a["severity"]) == a["severity"]
        ]

    def actions_list(self, args: dict[str, Any]) -> Any:
        key = f"{args['owner']}/{args['repo']}"
        runs = self.repo(args)["runs"]
        if args["method"] == "list_workflows":
            names = sorted({r["name"] for r in runs})
            return {
                "total_count": len(names),
                "workflows": [
                    {"name": n, "path": f".github/workflows/{n.lower()}.yml"} for n in names
                ],
            }
        if args["method"] != "list_workflow_runs":
            return {"message": f"actions_list {args['method']}: no fixture for this method"}
        wanted = args.get("workflow_runs_filter", {})
        rows = [
            {
                **r,
                "event": "push",
                "html_url": f"{URL}/{key}/actions/runs/{r['id']}",
                "created_at": "2026-08-12T10:00:00Z",
            }
            for r in runs
            if all(
                r.get({"branch": "head_branch"}.get(k, k)) == v
                or (k == "status" and r["conclusion"] == v)
                for k, v in wanted.items()
            )
        ]
        return {"total_count": len(rows), "workflow_runs": rows}

    # ------------------------------------------------------------------ the user

    def get_me(self, args: dict[str, Any]) -> Any:
        return {
            "login": ME,
            "name": "Octo Cat",
            "company": "acme",
            "public_repos": 1,
            "html_url": f"{URL}/{ME}",
        }

    def get_teams(self, args: dict[str, Any]) -> Any:
        return [
            {"org": org, "teams": [{"name": t, "slug": t} for t in teams]}
            for org, teams in self.teams.items()
        ]

    def list_notifications(self, args: dict[str, Any]) -> Any:
        repo = f"{args['owner']}/{args['repo']}" if "owner" in args and "repo" in args else None
        show_read = args.get("filter") == "include_read_notifications"
        return [
            {
                "id": n["id"],
                "reason": n["reason"],
                "unread": n["state"] == "unread",
                "repository": {"full_name": n["repo"]},
                "subject": {"title": n["title"], "type": n["type"]},
                "updated_at": "2026-08-12T10:00:00Z",
            }
            for n in self.notifications
            if n["state"] != "done"
            and (show_read or n["state"] == "unread")
            and (repo is None or fnmatch.fnmatch(n["repo"], repo))
        ]

    def dismiss_notification(self, args: dict[str, Any]) -> Any:
        for n in self.notifications:
            if n["id"] == args["threadID"]:
                n["state"] = args["state"]
                return f"Notification {n['id']} marked as {args['state']}"
        raise NotFound(f"notification {args['threadID']} not found")

    def create_gist(self, args: dict[str, Any]) -> Any:
        ident = sha_of(f"gist-{len(self.gists)}")[:20]
        gist = {
            "id": ident,
            "description": args.get("description", ""),
            "public": args.get("public", False),
            "files": {args["filename"]: args["content"]},
            "html_url": f"https://gist.github.com/{ident}",
        }
        self.gists.append(gist)
        return {"id": ident, "html_url": gist["html_url"], "public": gist["public"]}


def _generic(name: str) -> Callable[[dict[str, Any]], Any]:
    def answer(args: dict[str, Any]) -> Any:
        return {"message": f"{name}: the fake backend has no fixture for this tool", "items": []}

    return answer


def github_registry(world: World, corpus: list[dict[str, Any]] | None = None) -> ToolRegistry:
    """A registry of all the corpus's tools, answering from ``world``."""
    registry = ToolRegistry()
    for entry in load_corpus() if corpus is None else corpus:
        name = entry["name"]
        answer = getattr(world, name, None) or _generic(name)
        hints = entry.get("annotations", {})
        read_only = hints.get("readOnlyHint") is True

        async def execute(
            args: Any,
            ctx: ToolRunContext,
            name: str = name,
            answer: Callable[[dict[str, Any]], Any] = answer,
        ) -> Any:
            call = Call(name=name, args=copy.deepcopy(args))
            world.calls.append(call)
            try:
                value = answer(args)
            except ToolError as exc:
                call.error = exc.message
                raise
            call.value = copy.deepcopy(value)
            return value

        registry.register(
            ToolDefinition(
                name=name,
                description=entry["description"],
                parameters=entry["inputSchema"],
                output=ToolOutput(schema=MCP_OUTPUT),
                execute=execute,
                concurrency_safe=read_only,
                annotations=ToolAnnotations(
                    title=hints.get("title"),
                    read_only=hints.get("readOnlyHint"),
                    destructive=hints.get("destructiveHint"),
                    idempotent=hints.get("idempotentHint"),
                    open_world=hints.get("openWorldHint"),
                ),
            )
        )
    return registry
