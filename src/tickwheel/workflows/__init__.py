"""The DAG workflow service: registration, runs and the orchestrator, built on the client."""
