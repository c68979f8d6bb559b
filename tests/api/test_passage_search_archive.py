"""POST /v1/passages/search with an archive_id searches that shared archive's passages (Letta's
letta/server/rest_api/routers/v1/passages.py), by full text, with its tag filters; another owner's archive is 404."""

from tests.factories import ApiClient


def test_passage_search_by_archive(api, account, other_account):
    archive = api.post("/v1/archives/", {"name": "shared facts"}).json()
    texts = [
        ("Python is a popular programming language.", ["code"]),
        ("Turbopuffer is a vector database.", ["db"]),
        ("A vector of numbers, tagged code.", ["code"]),
    ]
    for text, tags in texts:
        r = api.post(f"/v1/archives/{archive['id']}/passages", {"text": text, "tags": tags})
        assert r.status_code == 200, r.content
    api.post("/v1/archives/", {"name": "other"})  # another archive of the same owner: never searched here
    hits = api.post("/v1/passages/search", {"query": "vector database", "archive_id": archive["id"]}).json()
    assert hits[0]["passage"]["text"] == "Turbopuffer is a vector database." and hits[0]["score"] > 0
    assert {h["passage"]["text"] for h in hits} <= {t for t, _ in texts}
    tagged = api.post("/v1/passages/search", {"query": "vector", "archive_id": archive["id"], "tags": ["code"]})
    assert [h["passage"]["text"] for h in tagged.json()] == ["A vector of numbers, tagged code."]
    listed = api.post("/v1/passages/search", {"archive_id": archive["id"], "limit": 2}).json()
    assert len(listed) == 2 and all(h["score"] == 0.0 for h in listed)
    other = ApiClient(other_account.token)
    assert other.post("/v1/passages/search", {"query": "vector", "archive_id": archive["id"]}).status_code == 404
    assert api.post("/v1/passages/search", {"archive_id": "archive-x"}).status_code == 404
