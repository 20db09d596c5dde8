"""The application layer: the rules of executions, definitions and workflows as plain services
over the store protocols. The in-process transports, the API routes, the Cron Service and the
orchestrator call them; they return domain objects and typed outcomes (``outcomes.py``), and
errors travel as ``tickwheel.domain.errors`` exceptions. Nothing here knows HTTP or the wire
format: only the API edge and the transports map outcomes to status codes and JSON."""
