"""The JSON shapes of the cron API (camelCase), shared by the Cron Service's in-process rules
that render and read them and by the SDK, so neither can drift from the other.

``spec_from_wire`` is the one reader of a cron job document: the API's request bodies, the
documents of a ``tickwheel cron apply`` file and the SDK's arguments all go through it, so a bad
field gets the same 422, with the same path, whichever way it came in."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal

from tickwheel.client.wire import BAD_CURSOR, cursor_bytes, cursor_from_bytes, iso
from tickwheel.domain.cron import DstPolicy, FirePreview
from tickwheel.domain.cron_jobs import (
    AuditEntry,
    CronJob,
    CronJobSpec,
    CronTarget,
    MisfirePolicy,
    OccurrenceRecord,
    OverlapPolicy,
    validate_spec,
)
from tickwheel.domain.definition_refs import to_uri
from tickwheel.domain.errors import BadRequest, ErrorList, FieldError, InvalidInput
from tickwheel.domain.jsonvalues import VERSION_MAX, int64_problem, text_problem
from tickwheel.resources import cron as resources
from tickwheel.store.cron_protocol import HistoryCursor

Wire = dict[str, Any]

SPEC_FIELDS = (
    "name",
    "definitionUri",
    "definitionVersion",
    "workflow",
    "inputs",
    "expression",
    "timezone",
    "dstPolicy",
    "misfirePolicy",
    "maxCatchUp",
    "overlapPolicy",
    "jitter",
    "startAt",
    "endAt",
)
REQUIRED = ("name", "expression")
"""And exactly one target, ``definitionUri`` or ``workflow`` (``validate_spec`` says so)."""


def spec_to_wire(spec: CronJobSpec) -> Wire:
    workflow = None
    if spec.workflow_name is not None:
        workflow = {"name": spec.workflow_name, "version": spec.workflow_version}
    return {
        "name": spec.name,
        "definitionUri": spec.definition_uri,
        "definitionVersion": spec.definition_version,
        "workflow": workflow,
        "inputs": spec.inputs,
        "expression": spec.expression,
        "timezone": spec.timezone,
        "dstPolicy": spec.dst_policy.to_document(),
        "misfirePolicy": str(spec.misfire_policy),
        "maxCatchUp": spec.max_catch_up,
        "overlapPolicy": str(spec.overlap_policy),
        "jitter": spec.jitter_seconds,
        "startAt": iso(spec.start_at),
        "endAt": iso(spec.end_at),
    }


def spec_from_wire(
    doc: Mapping[str, Any], base: CronJobSpec | None = None, *, allow: tuple[str, ...] = ()
) -> CronJobSpec:
    """A validated spec from a document; with ``base``, a partial document changes only the
    fields it names (PATCH). Unknown fields are refused, except those in ``allow`` (which the
    caller reads itself, e.g. ``version``). Every bad field is reported at once."""
    errors = ErrorList()
    if not isinstance(doc, Mapping):
        raise InvalidInput(
            "a cron job must be a JSON object", [FieldError("body", "not an object")]
        )
    for key in doc:
        if key not in SPEC_FIELDS and key not in allow:
            errors.add(key, "is not a known field")
    if base is None:
        for key in REQUIRED:
            if doc.get(key) is None:
                errors.add(key, "is required")
    read = _Reader(doc, errors)
    changes: dict[str, Any] = {
        "name": read.text("name"),
        "definition_uri": read.uri("definitionUri"),
        "definition_version": read.version("definitionVersion"),
        "workflow": read.workflow("workflow"),
        "inputs": read.object("inputs"),
        "expression": read.text("expression"),
        "timezone": read.text("timezone"),
        "dst_policy": read.dst_policy("dstPolicy"),
        "misfire_policy": read.choice("misfirePolicy", MisfirePolicy),
        "max_catch_up": read.integer("maxCatchUp"),
        "overlap_policy": read.choice("overlapPolicy", OverlapPolicy),
        "jitter_seconds": read.integer("jitter"),
        "start_at": read.instant("startAt"),
        "end_at": read.instant("endAt"),
    }
    if errors.items:
        found = "; ".join(f"{e.path}: {e.message}" for e in errors.items)
        raise InvalidInput(f"the cron job is invalid: {found}", errors.items)
    given = _target(changes)
    if base is None:
        given.setdefault("definition_uri", None)
        spec = CronJobSpec(**{k: v for k, v in given.items() if v is not None or k in _NULLABLE})
    else:
        spec = replace(base, **given)
    validate_spec(spec)
    return spec


_ABSENT: Any = object()
_NULLABLE = {"definition_uri", "definition_version", "start_at", "end_at", "workflow_version"}


def _target(changes: dict[str, Any]) -> dict[str, Any]:
    """The fields given, with ``workflow`` spread into its two fields. Naming one target in a
    PATCH switches the job to it (the other is cleared); naming both is left for
    ``validate_spec`` to refuse."""
    given = {k: v for k, v in changes.items() if v is not _ABSENT}
    workflow = given.pop("workflow", _ABSENT)
    if workflow is not _ABSENT:
        name, version = workflow if workflow is not None else (None, None)
        given["workflow_name"], given["workflow_version"] = name, version
        if name is not None and "definition_uri" not in given:
            given["definition_uri"] = None
            given.setdefault("definition_version", None)
    if given.get("definition_uri") is not None and "workflow_name" not in given:
        given["workflow_name"] = given["workflow_version"] = None
    return given


class _Reader:
    """Reads one field at a time, noting what is wrong; ``_ABSENT`` for a field not given."""

    def __init__(self, doc: Mapping[str, Any], errors: ErrorList) -> None:
        self.doc, self.errors = doc, errors

    def _get(self, key: str) -> Any:
        return self.doc.get(key, _ABSENT)

    def _bad(self, key: str, message: str) -> Any:
        self.errors.add(key, message)
        return _ABSENT

    def text(self, key: str) -> Any:
        value = self._get(key)
        if value is _ABSENT:
            return value
        if not isinstance(value, str) or not value.strip():
            return self._bad(key, "must be a non-empty string")
        return value.strip()

    def uri(self, key: str) -> Any:
        value = self.text(key)
        return to_uri(value) if isinstance(value, str) else value  # a bare name or a URI

    def version(self, key: str) -> Any:
        value = self._get(key)
        if value is None or value == "latest":
            return None
        if value is _ABSENT or _is_version(value):
            return value
        return self._bad(
            key, f"must be an integer from 1 to {VERSION_MAX}, or null (or 'latest') for the latest"
        )

    def workflow(self, key: str) -> Any:
        """``{"name": ..., "version"?: ...}`` (or the bare name) as ``(name, version)``."""
        value = self._get(key)
        if value is _ABSENT or value is None:
            return value
        if isinstance(value, str):
            value = {"name": value}
        if not isinstance(value, Mapping):
            return self._bad(key, 'must be an object such as {"name": "nightly-report"}')
        unknown = [k for k in value if k not in ("name", "version")]
        if unknown:
            return self._bad(f"{key}.{unknown[0]}", "is not a known field (name, version)")
        name, version = value.get("name"), value.get("version")
        if not isinstance(name, str) or not name.strip():
            return self._bad(f"{key}.name", "is required: the workflow's name")
        if version == "latest":
            version = None
        if version is not None and not _is_version(version):
            return self._bad(
                f"{key}.version",
                f"must be an integer from 1 to {VERSION_MAX}, or null for the latest",
            )
        return (name.strip(), version)

    def object(self, key: str) -> Any:
        value = self._get(key)
        if value is None:
            return {}
        if value is _ABSENT or isinstance(value, dict):
            return value
        return self._bad(key, "must be an object")

    def integer(self, key: str) -> Any:
        value = self._get(key)
        if value is _ABSENT or (type(value) is int and int64_problem(value) is None):
            return value
        return self._bad(key, "must be an integer (64-bit)")

    def choice(self, key: str, kind: type[MisfirePolicy] | type[OverlapPolicy]) -> Any:
        value = self._get(key)
        if value is _ABSENT:
            return value
        try:
            return kind(value)
        except ValueError:
            options = ", ".join(str(k) for k in kind)
            return self._bad(key, f"must be one of {options}, got {value!r}")

    def dst_policy(self, key: str) -> Any:
        value = self._get(key)
        if value is _ABSENT:
            return value
        try:
            return DstPolicy.from_document(value, key)
        except InvalidInput as exc:
            self.errors.items.extend(exc.errors)
            return _ABSENT

    def instant(self, key: str) -> Any:
        value = self._get(key)
        if value is _ABSENT or value is None:
            return value
        if not isinstance(value, str):
            return self._bad(key, "must be an RFC 3339 time such as 2026-01-01T09:00:00Z")
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return self._bad(key, "must be an RFC 3339 time such as 2026-01-01T09:00:00Z")
        if parsed.tzinfo is None:
            return self._bad(key, "must carry a UTC offset (RFC 3339), e.g. Z or +02:00")
        return parsed


def job_to_wire(job: CronJob, next_fires: list[FirePreview] | None = None) -> Wire:
    spec = job.spec
    workflow = None
    if spec.workflow_name is not None:
        workflow = resources.WorkflowTarget.model_construct(
            name=spec.workflow_name, version=spec.workflow_version
        )
    fires = None if next_fires is None else [_fire_time(p) for p in next_fires]
    return resources.CronJob.model_construct(
        cron_job_id=job.cron_job_id,
        name=spec.name,
        definition_uri=spec.definition_uri,
        definition_version=spec.definition_version,
        workflow_target=workflow,
        inputs=spec.inputs,
        expression=spec.expression,
        timezone=spec.timezone,
        dst_policy=resources.DstPolicy.model_construct(
            nonexistent=spec.dst_policy.nonexistent, ambiguous=spec.dst_policy.ambiguous
        ),
        misfire_policy=spec.misfire_policy,
        max_catch_up=spec.max_catch_up,
        overlap_policy=spec.overlap_policy,
        jitter=spec.jitter_seconds,
        start_at=spec.start_at,
        end_at=spec.end_at,
        target=spec.target,
        definition_version_policy=_version_policy(spec, CronTarget.DEFINITION),
        workflow_version_policy=_version_policy(spec, CronTarget.WORKFLOW),
        status=job.status,
        next_run_at=job.next_run_at,
        last_occurrence=job.last_occurrence,
        last_execution_id=job.last_execution_id,
        last_workflow_run_id=job.last_workflow_run_id,
        version=job.version,
        created_at=job.created_at,
        updated_at=job.updated_at,
        paused_at=job.paused_at,
        label=job.label,
        fire_times=fires,
    ).to_wire()


def _version_policy(spec: CronJobSpec, target: CronTarget) -> Literal["latest", "pinned"] | None:
    if spec.target is not target:
        return None
    version = spec.definition_version if target is CronTarget.DEFINITION else spec.workflow_version
    return "latest" if version is None else "pinned"


def _fire_time(preview: FirePreview) -> resources.FireTime:
    return resources.FireTime.model_construct(
        at=preview.at,
        local=preview.local,
        zone=preview.local.tzname(),
        fires=preview.fires,
        dst=preview.dst,
        reason=preview.reason,
    )


def preview_to_wire(preview: FirePreview) -> Wire:
    """One fire time, in UTC (``at``) and in the job's zone (``local``), and what a DST rule
    did to it (``dst``: shifted, first, second, repeated, skipped) and why."""
    return _fire_time(preview).to_wire()


def record_to_wire(
    record: OccurrenceRecord,
    execution_status: str | None = None,
    workflow_run_status: str | None = None,
) -> Wire:
    return resources.Occurrence.model_construct(
        occurrence=record.occurrence,
        outcome=record.outcome,
        execution_id=record.execution_id,
        execution_status=execution_status,
        workflow_run_id=record.workflow_run_id,
        workflow_run_status=workflow_run_status,
        execute_at=record.execute_at,
        reason=record.reason,
        recorded_at=record.recorded_at,
    ).to_wire()


def audit_to_wire(entry: AuditEntry) -> Wire:
    return resources.AuditEntry.model_construct(
        action=entry.action, actor=entry.actor, at=entry.at, before=entry.before, after=entry.after
    ).to_wire()


def parse_ref(ref: str) -> uuid.UUID | str:
    """A cron job is named in paths by its id or by its name."""
    try:
        return uuid.UUID(ref)
    except ValueError:
        return ref


def _is_version(value: Any) -> bool:
    return type(value) is int and 1 <= value <= VERSION_MAX


# -- cursors: opaque to clients, strictly read back -------------------------------------------


def history_cursor(row: OccurrenceRecord) -> str:
    return cursor_from_bytes(json.dumps([iso(row.occurrence), row.record_id]).encode())


def read_history_cursor(cursor: str) -> HistoryCursor:
    try:
        occurrence, record_id = json.loads(cursor_bytes(cursor))
        at = datetime.fromisoformat(occurrence)
        if at.tzinfo is None or type(record_id) is not int or int64_problem(record_id):
            raise ValueError("not a cursor of ours")
        return HistoryCursor(at, record_id)
    except (ValueError, TypeError) as exc:
        raise BadRequest(BAD_CURSOR, {"cursor": cursor[:100]}) from exc


def name_cursor(name: str) -> str:
    """A page of jobs ends at a name; the cursor wraps it, so a name typed in its place (or any
    other garbage) is a 400, not a silently different page."""
    return cursor_from_bytes(json.dumps(["after", name]).encode())


def read_name_cursor(cursor: str) -> str:
    try:
        tag, name = json.loads(cursor_bytes(cursor))
    except (ValueError, TypeError) as exc:
        raise BadRequest(BAD_CURSOR, {"cursor": cursor[:100]}) from exc
    if tag != "after" or not isinstance(name, str) or text_problem(name):
        raise BadRequest(BAD_CURSOR, {"cursor": cursor[:100]})
    return name
