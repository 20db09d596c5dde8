"""``client.flow`` in the SDK, on both backends: the blocking client in process
(``tickwheel.connect``) answers the API's typed models; another tenant's definition is NotFound.
The async client over HTTP: tests/api/test_pause_api.py."""

from __future__ import annotations

import pytest

import tickwheel
from tests.client.conftest import GREET_JSON, Database
from tickwheel.domain.errors import NotFound
from tickwheel.resources.flow import DefinitionFlowState, TenantFlowState


def test_the_blocking_client_pauses_and_resumes_in_process(database: Database) -> None:
    with tickwheel.connect(database.url, tenant="acme") as client:
        client.apply_definition(GREET_JSON, "json")
        paused = client.flow.pause("greet", "deploy")
        assert isinstance(paused, DefinitionFlowState)
        assert paused.paused and paused.pauses[0].reason == "deploy"
        assert client.flow.state("greet").paused
        assert not client.flow.resume("greet").paused
        tenant = client.flow.pause_tenant("freeze")
        assert isinstance(tenant, TenantFlowState) and tenant.paused and tenant.tenant == "acme"
        assert client.flow.state("greet").paused  # held by the tenant's pause
        assert not client.flow.resume_tenant().paused
        with pytest.raises(NotFound):
            client.flow.pause("nope")
        with pytest.raises(ValueError, match="own tenant"):
            client.flow.pause_tenant(tenant="globex")
    with tickwheel.connect(database.url, tenant="globex") as other, pytest.raises(NotFound):
        other.flow.pause("greet")  # acme's definition: unknown to globex
