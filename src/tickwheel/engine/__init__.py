"""Long-running services that move executions through time (scheduler, workers, reaper).
They see only ``store.protocol``; the engine issue fills this package."""
