"""``/openapi.json`` against the routes: every operation documents its success body (a real
schema, not ``{}``), its refusals with the error body the API really sends, and the bearer
scheme of the routes that need a key."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi.routing import APIRoute

from tests.api.conftest import Api
from tests.factories import definition_doc

PUBLIC = {"/healthz", "/readyz"}
JSON_TYPES: dict[str, type | tuple[type, ...]] = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "null": type(None),
}


def problems(value: Any, schema: dict[str, Any], doc: dict[str, Any], at: str = "") -> list[str]:
    """Where ``value`` breaks ``schema`` (the subset of JSON Schema FastAPI writes), resolving
    ``$ref`` in ``doc``."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return problems(value, doc["components"]["schemas"][name], doc, at)
    if "anyOf" in schema:
        options = [problems(value, option, doc, at) for option in schema["anyOf"]]
        return [] if any(not found for found in options) else [f"{at}: matches no anyOf"]
    found: list[str] = []
    kind = schema.get("type")
    if kind is not None:
        expected = JSON_TYPES[kind]
        if not isinstance(value, expected) or (kind == "integer" and isinstance(value, bool)):
            return [f"{at}: {value!r} is not {kind}"]
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{at}: {value!r} not in {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        found.append(f"{at}: {value!r} is not {schema['const']!r}")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        found += [f"{at}.{k}: missing" for k in schema.get("required", []) if k not in value]
        for key, item in value.items():
            if key in properties:
                found += problems(item, properties[key], doc, f"{at}.{key}")
            elif schema.get("additionalProperties") is False or (
                properties and "additionalProperties" not in schema
            ):
                found.append(f"{at}.{key}: not documented")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            found += problems(item, schema["items"], doc, f"{at}[{i}]")
    return found


def api_routes(routes: list[Any]) -> list[Any]:
    """The API routes of ``app.routes``, also those of included routers (which FastAPI keeps
    behind one entry per router)."""
    found: list[Any] = []
    for route in routes:
        if isinstance(route, APIRoute):
            found.append(route)
        elif hasattr(route, "effective_route_contexts"):
            found += [c for c in route.effective_route_contexts() if hasattr(c, "response_model")]
    return found


async def document(api: Api) -> dict[str, Any]:
    r = await api.http.get("/openapi.json")
    assert r.status_code == 200
    result: dict[str, Any] = r.json()
    return result


async def test_every_route_documents_a_success_body_with_a_schema(api: Api) -> None:
    doc = await document(api)
    app = api.http._transport.app  # type: ignore[attr-defined]
    routes = [r for r in api_routes(app.routes) if r.include_in_schema]
    assert len(routes) >= 35
    for route in routes:
        assert route.response_model is not None, f"{route.methods} {route.path}"
        for method in route.methods:
            operation = doc["paths"][route.path][method.lower()]
            ok = {s: r for s, r in operation["responses"].items() if s.startswith("2")}
            assert ok, f"{method} {route.path}"
            for status, response in ok.items():
                schema = response["content"]["application/json"]["schema"]
                assert schema and schema != {}, f"{method} {route.path} {status}"
                # One model, or one of several (the batch: in full or, with Prefer, receipts).
                for one in schema.get("anyOf", [schema]):
                    name = one["$ref"].rsplit("/", 1)[-1]
                    assert doc["components"]["schemas"][name].get("properties"), name


async def test_refusals_are_documented_with_the_error_body(api: Api) -> None:
    doc = await document(api)
    error = {"$ref": "#/components/schemas/ErrorBody"}
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            assert {"4XX", "5XX"} <= set(responses), f"{method} {path}"
            for status, response in responses.items():
                if status[0] in "45" and not (path == "/readyz" and status == "503"):
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == error, f"{method} {path} {status}"
            if path not in PUBLIC:
                assert {"401", "503"} <= set(responses), f"{method} {path}"
    assert "HTTPValidationError" not in doc["components"]["schemas"]


async def test_the_documented_error_body_is_what_the_api_sends(api: Api) -> None:
    doc = await document(api)
    error = {"$ref": "#/components/schemas/ErrorBody"}
    answers = [
        await api.http.post("/v1/executions", json={"definitionUri": "x", "bogus": 1}),
        await api.http.get("/v1/executions/0190c0de-0000-7000-8000-000000000000"),
        await api.http.get("/v1/executions", params={"cursor": "nonsense"}),
        await api.http.get("/v1/executions", headers={"Authorization": "Bearer nope"}),
        await api.http.post("/healthz"),
    ]
    assert [a.status_code for a in answers] == [422, 404, 400, 401, 405]
    for answer in answers:
        assert problems(answer.json(), error, doc) == [], answer.text
    # And the check bites: a body without details, or with a stray key, is not the error body.
    assert problems({"error": {"code": "x", "message": "y"}}, error, doc)
    stray = {"error": {"code": "x", "message": "y", "details": None}, "extra": 1}
    assert problems(stray, error, doc)


async def test_success_bodies_match_their_documented_schema(api: Api) -> None:
    doc = await document(api)
    r = await api.http.put("/v1/definitions", json=definition_doc())
    assert r.status_code == 201
    submitted = await api.http.post(
        "/v1/executions", json={"definitionUri": "registry://jobs/greet", "inputs": {"name": "A"}}
    )
    listed = await api.http.get("/v1/executions")
    for answer, path, method in (
        (r, "/v1/definitions", "put"),
        (submitted, "/v1/executions", "post"),
        (listed, "/v1/executions", "get"),
    ):
        responses = doc["paths"][path][method]["responses"]
        schema = responses[str(answer.status_code)]["content"]["application/json"]["schema"]
        assert problems(answer.json(), schema, doc) == [], (path, answer.text)


async def test_the_bearer_scheme_guards_every_route_but_health(api: Api) -> None:
    doc = await document(api)
    schemes = doc["components"]["securitySchemes"]
    [(name, scheme)] = schemes.items()
    assert scheme["type"] == "http" and scheme["scheme"] == "bearer"
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            expected = None if path in PUBLIC else [{name: []}]
            assert operation.get("security") == expected, f"{method} {path}"
    anonymous = await httpx.AsyncClient(
        transport=api.http._transport, base_url="http://testserver"
    ).get("/v1/executions")
    assert anonymous.status_code == 401  # declared, and still enforced the same way
