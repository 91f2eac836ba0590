"""The search's word normalisation and ranking (``sdkgen._search``), on small made-up tool sets.

The GitHub corpus cases are in ``test_discovery.py``; these pin each rule down
on its own, so that a change of weights cannot hide one.
"""

from __future__ import annotations

from typing import Any

import pytest

from sdkgen import ToolCatalog
from sdkgen._search import terms


def _tool(
    name: str, description: str = "", required: tuple[str, ...] = (), **properties: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "parameters": {"type": "object", "properties": properties, "required": list(required)},
    }


def _names(catalog: ToolCatalog, query: str, limit: int = 10) -> list[str]:
    return [hit["name"] for hit in catalog.search(query, limit)]


# ---------------------------------------------------------------------- words


@pytest.mark.parametrize(
    "forms",
    [
        ("organization", "organizations", "organisation", "organisations", "org", "orgs", "Org"),
        ("repository", "repositories", "repo", "repos"),
        ("authorize", "authorise", "authorized", "authorised", "authorizing", "authorising"),
        ("review", "reviews", "reviewed", "reviewing"),
        ("create", "created", "creating", "creation"),
        ("delete", "deleted", "deletion", "deletions"),
        ("assign", "assignee", "assignees"),
        ("star", "starred", "stars"),
        ("configuration", "config", "configs"),
    ],
)
def test_the_forms_of_a_word_are_one_term(forms: tuple[str, ...]) -> None:
    assert len({tuple(terms(form)) for form in forms}) == 1, {f: terms(f) for f in forms}


def test_short_words_keep_their_spelling() -> None:
    # -ise is only -ize after three letters: "raise" is not "raize"; -ion
    # and -ee only end longer words
    assert terms("raise raises noise wise") == ["rais", "rais", "nois", "wis"]
    assert terms("action actions option free") == ["action", "action", "option", "fre"]
    assert terms("status address alias") == ["status", "address", "alia"]


# ---------------------------------------------------------------------- matching


def test_a_word_finds_its_other_forms() -> None:
    catalog = ToolCatalog(
        [
            _tool("list_org_members", "Members of an org."),
            _tool("authorize_payment", "Authorize a payment."),
            _tool("delete_branch", "Delete a branch."),
            _tool("assign_ticket", "Assign a ticket to a user."),
            _tool("get_weather", "The weather."),
        ]
    )
    assert _names(catalog, "organisation members") == ["list_org_members"]
    assert _names(catalog, "organizations") == ["list_org_members"]
    assert _names(catalog, "authorise payments") == ["authorize_payment"]
    assert _names(catalog, "branch deletion") == ["delete_branch"]
    assert _names(catalog, "ticket assignees") == ["assign_ticket"]


# ---------------------------------------------------------------------- ranking


def test_an_operation_reads_as_part_of_the_name() -> None:
    # A required enum argument selects what a call does: "get_reviews" makes
    # pr_read a reviews reader, as much as its name; an optional enum does not.
    catalog = ToolCatalog(
        [
            _tool(
                "pr_read",
                "Read a pull request: its diff, files or reviews.",
                ("method",),
                method={"type": "string", "enum": ["get_diff", "get_files", "get_reviews"]},
            ),
            _tool("create_pr_review", "Create a review on a pull request, or a review comment."),
            _tool("request_pr_reviewers", "Request reviewers for a pull request review."),
            _tool(
                "pr_list",
                "List pull requests: open, closed, or with reviews.",
                sort={"type": "string", "enum": ["get_reviews", "updated"]},
            ),
        ]
    )
    assert _names(catalog, "get pull request reviews", 1) == ["pr_read"]
    assert _names(catalog, "pr diff", 1) == ["pr_read"]
    assert _names(catalog, "create pr review", 1) == ["create_pr_review"]
    assert _names(catalog, "pr reviews")[-1] == "pr_list"


def test_a_required_choice_of_state_reads_as_an_operation() -> None:
    catalog = ToolCatalog(
        [
            _tool(
                "update_ticket_state",
                "Change a ticket's state.",
                ("state",),
                state={"type": "string", "enum": ["open", "closed"]},
            ),
            _tool(
                "ticket_read",
                "Read a ticket: when it was closed, who closed it, the closed reason.",
            ),
        ]
    )
    assert _names(catalog, "close ticket") == ["update_ticket_state", "ticket_read"]


def test_the_name_in_the_query_s_own_form_comes_first() -> None:
    # A plural asks for a list, a singular for one: among names that say the
    # same words, the one in the query's form ranks first.
    catalog = ToolCatalog(
        [
            _tool("get_alert", "Get one alert: the alert, its state and the alert's rule."),
            _tool("list_alerts", "List alerts."),
        ]
    )
    assert _names(catalog, "alerts") == ["list_alerts", "get_alert"]
    assert _names(catalog, "alert") == ["get_alert", "list_alerts"]
    assert _names(catalog, "get alerts") == ["get_alert", "list_alerts"]  # more words first
