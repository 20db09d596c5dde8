"""What every long-running service shares (the engine's, the Cron Service, the orchestrator):
below the engine and the client both, so all three may build on it."""
