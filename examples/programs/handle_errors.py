# Keep going when a tool fails: every failure arrives as ToolCallError with the
# tool's name and a readable message.
wanted = ["timeouts", "no-such-doc", "caching"]
found, missing = [], []
for doc_id in wanted:
    try:
        doc = await tools.get_doc({"doc_id": doc_id})
        found.append(doc["title"])
    except ToolCallError as e:
        missing.append(f"{e.tool_name}: {e.message}")
try:
    await tools.close_issue({"issue_id": 3})
except ToolCallError as e:
    print("could not close #3:", e.message)
return {"found": found, "missing": missing}
