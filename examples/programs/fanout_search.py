# Fan out searches in parallel, fetch each distinct hit once, and report a digest.
# Only what is printed or returned goes back to the model.
import asyncio

queries = ["timeout", "retry", "cache", "latency"]
results = await asyncio.gather(*(tools.search_docs({"query": q, "limit": 3}) for q in queries))
ids = sorted({hit["id"] for hits in results for hit in hits})
docs = await asyncio.gather(*(tools.get_doc({"doc_id": doc_id}) for doc_id in ids))
for doc in docs:
    print(f"{doc['id']}: {doc['title']} [{', '.join(doc['tags'])}]")
return {"queries": len(queries), "distinct_docs": len(docs)}
