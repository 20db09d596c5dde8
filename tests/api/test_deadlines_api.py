"""Deadlines over HTTP, on both backends: ``startBy`` and ``deadline`` are kept and shown, an
impossible pair is a 422 that changes nothing, the fingerprint of a request without them is as
before, and an expired execution reads EXPIRED with its history; the dashboard shows both."""

from __future__ import annotations

from datetime import timedelta

from tests.api.conftest import Api
from tests.factories import T0, definition_doc
from tickwheel.domain.submission import SubmitRequest, fingerprint

BODY = {"definitionUri": "registry://jobs/greet", "inputs": {"name": "Ada"}}


async def test_limits_are_kept_shown_and_expire(api: Api) -> None:
    assert (await api.http.put("/v1/definitions", json=definition_doc())).status_code == 201
    body = {**BODY, "startBy": "2026-03-01T12:00:10Z", "deadline": "2026-03-01T12:05:00Z"}
    r = await api.http.post("/v1/executions", json=body)
    assert r.status_code == 201, r.text
    e = r.json()
    assert (e["startBy"], e["deadline"]) == ("2026-03-01T12:00:10Z", "2026-03-01T12:05:00Z")
    plain = (await api.http.post("/v1/executions", json=BODY)).json()
    assert "startBy" not in plain and "deadline" not in plain
    [expired] = await api.store.execution_expire_due(T0 + timedelta(seconds=11))
    assert str(expired.execution_id) == e["executionId"]
    got = (await api.http.get(f"/v1/executions/{e['executionId']}")).json()
    assert got["status"] == "EXPIRED" and got["error"]["kind"] == "expired"
    history = (await api.http.get(f"/v1/executions/{e['executionId']}/history")).json()
    assert [h["kind"] for h in history["items"]] == ["expired"]
    listed = (await api.http.get("/v1/executions", params={"status": "EXPIRED"})).json()
    assert [i["executionId"] for i in listed["items"]] == [e["executionId"]]
    r = await api.http.delete(f"/v1/executions/{e['executionId']}")
    assert r.status_code == 409 and "EXPIRED" in r.json()["error"]["message"]


async def test_impossible_limits_are_refused_and_change_nothing(api: Api) -> None:
    assert (await api.http.put("/v1/definitions", json=definition_doc())).status_code == 201
    cases = [
        ({"startBy": "2026-03-01T11:59:00Z"}, "startBy", "it could never start"),
        ({"deadline": "2026-03-01T12:00:00Z"}, "deadline", "it could never start"),
        (
            {"executeAt": "2026-03-01T13:00:00Z", "startBy": "2026-03-01T12:30:00Z"},
            "startBy",
            "after executeAt",
        ),
        (
            {"startBy": "2026-03-01T12:10:00Z", "deadline": "2026-03-01T12:05:00Z"},
            "startBy",
            "not be after deadline",
        ),
        ({"startBy": "soon"}, "startBy", ""),
        ({"deadline": 1767225600}, "deadline", ""),
    ]
    for extra, path, message in cases:
        r = await api.http.post("/v1/executions", json={**BODY, **extra})
        assert r.status_code == 422, (extra, r.text)
        details = r.json()["error"]["details"]
        assert any(path in str(d.get("path")) and message in d["message"] for d in details), (
            extra,
            details,
        )
    assert (await api.http.get("/v1/executions")).json()["items"] == []


def test_the_fingerprint_of_a_request_without_limits_is_unchanged() -> None:
    """A client retrying across the upgrade with the same key is still recognised."""
    plain = SubmitRequest("registry://jobs/greet", {"name": "Ada"})
    limited = SubmitRequest("registry://jobs/greet", {"name": "Ada"}, start_by=T0)
    # The digest before startBy and deadline existed, for this request.
    assert fingerprint(plain) == (
        "81adc11bbcfc822bbeed2d6abffdcee16a6b87b01b2a9a62c86a21483fa5a578"
    )
    assert fingerprint(limited) != fingerprint(plain)
