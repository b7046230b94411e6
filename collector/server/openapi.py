"""The collector's OpenAPI 3.1 document, kept by hand beside the handlers it describes.

Hand-kept because the records are validated by plain code (:mod:`collector.server.judge`), not
by a schema library; the fuzzing test (schemathesis, in the collector service's tests) holds the two
together: every reply it provokes must have a status and a body this document declares.
"""

from __future__ import annotations

from typing import Any

from collector.records import ACCEPTED_SCHEMA_VERSIONS, PROBE_KINDS
from collector.server.v1_records import REASONS_LISTED
from collector.settings import CollectorSettings

__all__ = ["openapi_document"]


def _error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


def _text(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"text/plain": {"schema": {"type": "string"}}}}


def _gratia_rmi(settings: CollectorSettings) -> dict[str, Any]:
    """``POST /gratia-servlets/rmi`` (collector/server/gratia_rmi.py): a form, GRACC's texts."""
    integer = {"type": "integer", "minimum": -(10**17), "maximum": 10**17}
    return {
        "post": {
            "summary": "Gratia probes: a ping, or an envelope of records (GRACC's wire protocol)",
            "description": "Senders are named in collector.gratia_senders with the networks they send from and the "
            "sites they report for (Gratia probes carry no token); a request from elsewhere is refused (400) before "
            "its body is read, and an envelope with a record under another ProbeName or SiteName is refused whole "
            "(403). Only the exact body 'OK' tells a Gratia probe that its records are durable.",
            "operationId": "postGratiaRmi",
            "requestBody": {
                "required": True,
                "description": f"At most {settings.max_body_bytes} bytes, as sent and decompressed.",
                "content": {
                    "application/x-www-form-urlencoded": {
                        "schema": {
                            "type": "object",
                            "required": ["command", "arg1", "from"],
                            "properties": {
                                "command": {"type": "string", "enum": ["multiupdate", "update"]},
                                "arg1": {
                                    "type": "string",
                                    "description": "A <RecordEnvelope> (multiupdate) or 'xxx' (update: a ping).",
                                },
                                "from": {
                                    "type": "string",
                                    "description": "The probe's name, one of collector.gratia_senders.",
                                },
                                **{
                                    k: integer
                                    for k in ("bundlesize", "xmlfiles", "tarfiles", "maxpendingfiles", "backlog")
                                },
                            },
                        }
                    }
                },
            },
            "responses": {
                "200": _text("'OK': a ping, or every record is durable in the collector's outbox."),
                "400": _text(
                    "'Error handling request: ...' (the form, the XML, or a sender not allowed) or "
                    "'Error processing record: ...' (the envelope refused whole); nothing was stored."
                ),
                "403": _text(
                    "'Error handling request: record N is for ProbeName|SiteName ..., which sender ... is not allowed "
                    "to report for ...': the envelope refused whole; nothing was stored."
                ),
                "413": _text("'Error: java.lang.IllegalStateException: Post too large': send smaller bundles."),
                "415": _text("'Error handling request: ...': the body is not a form."),
                "503": _text("'Service unavailable right now': nothing was stored; send again later."),
            },
        }
    }


def openapi_document(
    settings: CollectorSettings, version: str, ingest: tuple[str, ...] = ("/v1/records",)
) -> dict[str, Any]:
    """The document served at /openapi.json; ``ingest``: the ingest paths the application serves."""
    record = {
        "type": "object",
        "description": (
            "A fairacct record as collector.records.table_docs makes it: flat, every other field a string, "
            "number, boolean or null the store can hold (collector.schema); stored under an id of the sending "
            "probe's, the probe's own id kept as source_id."
        ),
        "required": ["id", "kind", "schema_version", "probe", "timestamp"],
        "properties": {
            "id": {"type": "string", "minLength": 1, "maxLength": 128},
            "kind": {"type": "string", "enum": list(PROBE_KINDS)},
            "schema_version": {"type": "integer", "enum": list(ACCEPTED_SCHEMA_VERSIONS)},
            "probe": {"type": "string", "description": "The sending probe: the name its token belongs to."},
            "timestamp": {"type": "string", "format": "date-time"},
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "fairacct collector",
            "version": version,
            "description": "Takes fairacct records from probes and answers only once they are durable.",
        },
        "components": {
            "securitySchemes": {
                "probeToken": {"type": "http", "scheme": "bearer", "description": "The probe's own token."}
            },
            "schemas": {
                "Record": record,
                "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
                "Accepted": {
                    "type": "object",
                    "required": ["accepted", "rejected"],
                    "properties": {
                        "accepted": {"type": "integer", "minimum": 0},
                        "rejected": {"type": "array", "maxItems": 0},
                    },
                },
                "PartlyRefused": {
                    "type": "object",
                    "required": ["error", "accepted", "refused", "rejected"],
                    "properties": {
                        "error": {"type": "string"},
                        "accepted": {"type": "integer", "minimum": 0},
                        "refused": {"type": "integer", "minimum": 1},
                        "rejected": {
                            "type": "array",
                            "description": f"Every refused record: the first {REASONS_LISTED} with their id and "
                            "reason, the others by index alone.",
                            "minItems": 1,
                            "maxItems": settings.max_records_per_request,
                            "items": {
                                "type": "object",
                                "required": ["index"],
                                "properties": {
                                    "index": {"type": "integer", "minimum": 0},
                                    "id": {"type": ["string", "null"]},
                                    "reason": {"type": "string"},
                                },
                            },
                        },
                    },
                },
            },
        },
        "paths": {
            "/v1/records": {
                "post": {
                    "summary": "Send a batch of records",
                    "operationId": "postRecords",
                    "security": [{"probeToken": []}],
                    "parameters": [
                        {
                            "name": "Content-Encoding",
                            "in": "header",
                            "required": False,
                            "schema": {"type": "string", "enum": ["gzip", "identity"]},
                        },
                    ],
                    "requestBody": {
                        "required": True,
                        "description": f"At most {settings.max_records_body_bytes} bytes, as sent and decompressed, "
                        f"and {settings.max_records_per_request} records.",
                        "content": {
                            "application/json": {
                                "schema": {"type": "array", "items": {"$ref": "#/components/schemas/Record"}}
                            },
                            "application/x-ndjson": {
                                "schema": {"type": "string", "description": "One record per line."}
                            },
                        },
                    },
                    "responses": {
                        "202": {
                            "description": "Every record is durable in the collector's outbox.",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Accepted"}}},
                        },
                        "400": {
                            "description": "With 'accepted': the records in 'rejected' were refused one by one "
                            "and every other one is durable. Without: the request was refused whole, nothing was "
                            "stored.",
                            "content": {
                                "application/json": {
                                    "schema": {
                                        "anyOf": [
                                            {"$ref": "#/components/schemas/PartlyRefused"},
                                            {"$ref": "#/components/schemas/Error"},
                                        ]
                                    }
                                }
                            },
                        },
                        "401": _error("No bearer token, or an unknown one."),
                        "403": _error(
                            "A record in another probe's name, or for a site or pool the probe may not report for "
                            "(collector.probes); nothing was stored."
                        ),
                        "409": _error(
                            "schema_too_new: a record's schema_version is newer than this collector takes (the "
                            "probe is of a later release); nothing was stored. Keep the batch until the collector "
                            "is upgraded."
                        ),
                        "413": _error(
                            "The body is over the size limit (as sent or decompressed), or holds more records than "
                            "a request may; nothing was stored. Send the batch in halves."
                        ),
                        "415": _error("A Content-Type or Content-Encoding the collector does not take."),
                        "429": _error(
                            "The probe has as many requests (or connections, each with a request) under way as it "
                            "may, or the store is slower than the probes and this probe holds its share of the "
                            "outbox's backpressure depth; nothing was stored. Retry after Retry-After."
                        ),
                        "503": _error(
                            "Nothing was stored: the outbox holds as many records as it may, its disk has no room, "
                            "or it cannot be written. Retry after Retry-After."
                        ),
                    },
                }
            },
            **({"/gratia-servlets/rmi": _gratia_rmi(settings)} if "/gratia-servlets/rmi" in ingest else {}),
            "/healthz": {
                "get": {
                    "summary": (
                        "Health: outbox depth, last flush; 503 when the store has not taken records for too long"
                    ),
                    "operationId": "health",
                    "responses": {
                        "200": {
                            "description": (
                                "Healthy ('ok'), or running with something to look at ('degraded': records set "
                                "aside as dead letters, delivery stuck, a flush round that failed unexpectedly, a "
                                "store down or refusing whose index templates are unchecked while records are taken; "
                                "listed in 'degraded')."
                            ),
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        },
                        "503": {
                            "description": (
                                "Unhealthy, the status saying why: 'store stale', 'flusher stopped', 'outbox disk "
                                "full: ...', 'outbox failing: ...', the summarizer failing or stopped. A full outbox "
                                "disk wins over a store that is down: 503, and 'degraded' still lists the store."
                            ),
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        },
                    },
                }
            },
            "/metrics": {
                "get": {
                    "summary": "Prometheus metrics (text format 0.0.4)",
                    "operationId": "metrics",
                    "responses": {
                        "200": {
                            "description": "The metrics.",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        }
                    },
                }
            },
            "/stats": {
                "get": {
                    "summary": "Counters as GRACC's collector gives them",
                    "operationId": "stats",
                    "responses": {
                        "200": {
                            "description": "Counts since the start.",
                            "content": {
                                "application/json": {
                                    "schema": {
                                        "type": "object",
                                        "required": ["Records", "RecordErrors", "Requests", "RequestErrors"],
                                        "properties": {
                                            k: {"type": "integer", "minimum": 0}
                                            for k in ("Records", "RecordErrors", "Requests", "RequestErrors")
                                        },
                                    }
                                }
                            },
                        }
                    },
                }
            },
            "/openapi.json": {
                "get": {
                    "summary": "This document",
                    "operationId": "openapi",
                    "responses": {
                        "200": {
                            "description": "The OpenAPI document.",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        }
                    },
                }
            },
        },
    }
