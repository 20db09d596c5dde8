"""The clients' ``database`` fixture (a URL per backend) for the recipes too."""

from tests.client.conftest import database

__all__ = ["database"]
