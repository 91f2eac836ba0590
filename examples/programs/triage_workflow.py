# Read, then write: comment on every open bug that has no comment yet, then file a
# follow-up issue. The mutating tools run alone, in the order the program calls them.
open_issues = await tools.list_issues({"state": "open"})
bugs = [issue for issue in open_issues if "bug" in issue["labels"]]
triaged = []
for issue in bugs:
    if not issue["comments"]:
        await tools.add_comment({"issue_id": issue["id"], "text": "Triaged: reproducing now."})
        triaged.append(issue["id"])
new = await tools.create_issue(
    {"title": "Add jitter to retry backoff", "body": "See the retry-policy doc.", "labels": ["http"]}
)
print(f"triaged {len(triaged)} bug(s), opened #{new['id']}")
return {"triaged": triaged, "created": new["id"]}
