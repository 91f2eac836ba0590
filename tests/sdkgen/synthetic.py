"""A deterministic generator of large, realistic tool sets (namespaced, like MCP servers).

``synthetic_tools(20, 50)`` is 1,000 tools: 20 services, each with 10 resources
and 5 operations, named ``<service>.<operation>_<resource>``, with descriptions
and typed parameters that read like real APIs. The same arguments always give
the same list. Used by the discovery tests and ``tests/benchmarks/bench_discovery.py``.
"""

from __future__ import annotations

from typing import Any

SERVICES = (
    ("billing", "Billing"),
    ("crm", "the CRM"),
    ("tickets", "the help desk"),
    ("calendar", "the team calendar"),
    ("storage", "object storage"),
    ("hr", "the HR system"),
    ("inventory", "the warehouse inventory"),
    ("analytics", "product analytics"),
    ("mail", "the mail server"),
    ("chat", "team chat"),
    ("deploy", "the deployment pipeline"),
    ("monitoring", "the monitoring stack"),
    ("docs", "the document store"),
    ("payments", "the payment gateway"),
    ("shipping", "the shipping carrier"),
    ("auth", "the identity provider"),
    ("search", "the search cluster"),
    ("wiki", "the company wiki"),
    ("forms", "the survey builder"),
    ("ads", "the advertising platform"),
)
REGIONS = ("", "_eu", "_us", "_apac", "_latam", "_staging", "_legacy", "_sandbox")
RESOURCES = (
    ("invoice", "invoices", "an invoice", "amount, currency and due date"),
    ("customer", "customers", "a customer", "name, email and lifetime value"),
    ("ticket", "tickets", "a ticket", "subject, priority and assignee"),
    ("event", "events", "an event", "title, start time and attendees"),
    ("file", "files", "a file", "path, size and checksum"),
    ("employee", "employees", "an employee", "name, team and start date"),
    ("order", "orders", "an order", "items, total and status"),
    ("report", "reports", "a report", "metrics, period and owner"),
    ("message", "messages", "a message", "sender, recipients and body"),
    ("webhook", "webhooks", "a webhook", "target URL, events and secret"),
    ("project", "projects", "a project", "name, members and deadline"),
    ("comment", "comments", "a comment", "author, text and thread"),
)
OPERATIONS = ("list", "get", "create", "update", "delete", "search", "archive", "export")


def _parameters(operation: str, resource: tuple[str, str, str, str]) -> dict[str, Any]:
    singular, plural, article, fields = resource
    props: dict[str, Any] = {}
    required: list[str] = []
    if operation in ("get", "update", "delete", "archive"):
        props[f"{singular}_id"] = {"type": "string", "description": f"The ID of {article}."}
        required.append(f"{singular}_id")
    if operation in ("list", "search", "export"):
        props["page"] = {"type": "integer", "minimum": 1, "description": "Page number (default 1)."}
        props["per_page"] = {
            "type": "integer",
            "minimum": 1,
            "maximum": 100,
            "description": "Results per page (default 30).",
        }
        props["sort"] = {
            "type": "string",
            "enum": ["created", "updated", "name"],
            "description": f"How to order the {plural}.",
        }
    if operation == "search":
        props["query"] = {"type": "string", "description": f"Words to look for in {plural}."}
        required.append("query")
    if operation in ("create", "update"):
        props["fields"] = {
            "type": "object",
            "description": f"The {singular}'s {fields}.",
            "properties": {
                "name": {"type": "string", "description": "A display name."},
                "tags": {"type": "array", "items": {"type": "string"}},
                "notes": {"type": "string", "description": "Free-form notes."},
            },
        }
        required.append("fields")
    if operation == "export":
        props["format"] = {"type": "string", "enum": ["csv", "json", "xlsx"]}
    if operation == "delete":
        props["force"] = {"type": "boolean", "description": "Delete even when still referenced."}
    return {"type": "object", "properties": props, "required": required}


def _description(operation: str, resource: tuple[str, str, str, str], where: str) -> str:
    singular, plural, article, fields = resource
    text = {
        "list": f"List the {plural} in {where}, newest first. Returns their {fields}.",
        "get": f"Get {article} from {where} by its ID, with its {fields}.",
        "create": f"Create {article} in {where}. Returns the new {singular}'s ID.",
        "update": f"Update {article} in {where}: only the given fields change.",
        "delete": f"Delete {article} from {where}. This cannot be undone.",
        "search": f"Search the {plural} of {where} by keywords in their {fields}.",
        "archive": f"Archive {article} in {where} so that it no longer shows in lists.",
        "export": f"Export the {plural} of {where} as a CSV, JSON or Excel file.",
    }[operation]
    return text


def synthetic_tools(namespaces: int, per_namespace: int) -> list[dict[str, Any]]:
    """``namespaces * per_namespace`` tool schemas in the registry's spelling."""
    combos = [(op, res) for res in RESOURCES for op in OPERATIONS]
    if per_namespace > len(combos):
        raise ValueError(f"at most {len(combos)} tools per namespace")
    if namespaces > len(SERVICES) * len(REGIONS):
        raise ValueError(f"at most {len(SERVICES) * len(REGIONS)} namespaces")
    tools: list[dict[str, Any]] = []
    for n in range(namespaces):
        service, where = SERVICES[n % len(SERVICES)]
        region = REGIONS[n // len(SERVICES)]
        namespace = service + region
        label = where + (f" ({region[1:]})" if region else "")
        # each namespace its own mix of operations and resources, always the same one
        start = (n * 7) % len(combos)
        for k in range(per_namespace):
            operation, resource = combos[(start + k * 5) % len(combos)]
            name = f"{operation}_{resource[1] if operation in ('list', 'search', 'export') else resource[0]}"
            tools.append(
                {
                    "name": f"{namespace}.{name}",
                    "description": _description(operation, resource, label),
                    "parameters": _parameters(operation, resource),
                }
            )
    return tools
