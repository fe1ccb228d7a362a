"""The catalog facts a TRAIN BY / PREDICT BY rewrite needs (corgipile.train's
signature, the models' classes), which ``corgipile proxy`` reads on the
client's own connection once it is idle (ProxySession.lookup sends the
batch and holds back its answers): which queries a plan needs, what their
answers say, and the text to send in place of the client's."""

from __future__ import annotations

import json
import uuid

from .._sql import quote_ident
from ..statements import TrainStatement
from . import wire
from .rewrite import (
    SIGNATURE_QUERY,
    Failure,
    Plan,
    Segment,
    classes_query,
    literal,
    render,
    signature_from_rows,
)

__all__ = ["lookup_queries", "read_answers", "translate", "cleanup_queries"]

Rows = list[list[str | None]]


def _model_names(plan: Plan) -> list[str]:
    return sorted({name for p in plan.predicts for name in p.model_names})


def _where_trains(plan: Plan) -> list[tuple[int, TrainStatement]]:
    return [(i, s) for i, (_, s) in enumerate(plan.pieces)
            if isinstance(s, TrainStatement) and s.source_query is not None]


def lookup_queries(plan: Plan) -> list[str]:
    """The queries whose answers translate(plan, ...) needs, in its order.
    A TRAIN BY ... WHERE also copies its rows into a temporary table here
    (recorded in plan.sources), as Client.execute does: in the source's
    order (no parallel or synchronized scan, for this batch only), and
    draws a model name from the table's name as the client does."""
    queries = []
    if plan.trains:
        queries.append(SIGNATURE_QUERY)
    names = _model_names(plan)
    if names:
        queries.append(classes_query(names))
    for index, stmt in _where_trains(plan):
        temp = f"corgipile_src_{uuid.uuid4().hex[:12]}"
        plan.sources[index] = temp
        assert stmt.source_query is not None
        queries.append("SELECT pg_catalog.set_config('max_parallel_workers_per_gather', '0', "
                       "true), pg_catalog.set_config('synchronize_seqscans', 'off', true)")
        queries.append(f"CREATE TEMPORARY TABLE {quote_ident(temp)} AS\n"
                       + stmt.source_query.as_string(None))
        model = stmt.model.value if hasattr(stmt.model, "value") else stmt.model
        queries.append("SELECT pg_catalog.format('%s_%s_%s', "
                       f"{literal(stmt.relname)}::pg_catalog.text, "
                       f"pg_catalog.lower({literal(model)}::pg_catalog.text), "
                       "pg_catalog.nextval('corgipile.model_name_seq'))")
    return queries


def cleanup_queries(plan: Plan, names: dict[int, str | None]) -> list[str]:
    """After the client's query: each TRAIN BY ... WHERE's model records
    its source (the table and the condition, as Client.execute records
    them) if it was trained from the temporary table, which is dropped."""
    queries = []
    for index, stmt in _where_trains(plan):
        temp = plan.sources.get(index)
        if temp is None:
            continue
        given = next((p.value for p in stmt.params if p.name == "model_name"), None)
        name = given if isinstance(given, str) else names.get(index)
        if name is not None:
            notes = json.dumps({"source_filter": stmt.where_text})
            queries.append(
                "SELECT corgipile.annotate_model(m.model_name, pg_catalog.format('%I.%I', "
                "n.nspname, c.relname), " + literal(notes) + "::pg_catalog.jsonb) "
                "FROM corgipile.models m, pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
                "ON n.oid OPERATOR(pg_catalog.=) c.relnamespace "
                f"WHERE m.model_name OPERATOR(pg_catalog.=) {literal(name)} "
                f"AND pg_catalog.strpos(m.relation, {literal(temp)}) OPERATOR(pg_catalog.>) 0 "
                f"AND c.oid OPERATOR(pg_catalog.=) {literal(stmt.relation)}::pg_catalog.regclass")
        queries.append(f"DROP TABLE IF EXISTS pg_temp.{quote_ident(temp)}")
    return queries


def read_answers(frames: list[tuple[int, bytes]]
                 ) -> tuple[list[Rows], list[tuple[str, str]] | None, bytes]:
    """The server's answers to a lookup batch, as the rows of each query,
    the ErrorResponse fields if one failed, and the ReadyForQuery message."""
    results: list[Rows] = [[]]
    error = None
    ready = b""
    for kind, frame in frames:
        if kind == 0x44:  # DataRow
            results[-1].append(wire.data_row_values(frame[5:]))
        elif kind == 0x43:  # CommandComplete
            results.append([])
        elif kind == 0x45 and error is None:  # ErrorResponse
            # a position would point into the lookup's text, not the client's
            error = [(code, value) for code, value in wire.error_fields(frame[5:])
                     if code not in "PpqW"]
        elif kind == 0x5A:
            ready = frame
    return results, error, ready


def model_names(plan: Plan, results: list[Rows]) -> dict[int, str | None]:
    """The model names drawn for each TRAIN BY ... WHERE, from the answers
    to lookup_queries(plan)."""
    at = (1 if plan.trains else 0) + (1 if _model_names(plan) else 0)
    out: dict[int, str | None] = {}
    for index, _ in _where_trains(plan):
        rows = results[at + 2] if at + 2 < len(results) else []
        out[index] = rows[0][0] if rows else None
        at += 3
    return out


def translate(plan: Plan, results: list[Rows]) -> tuple[str, list[Segment]] | Failure:
    """rewrite.render with the answers to lookup_queries(plan)."""
    sig = signature_from_rows(results[0]) if plan.trains else None
    classes_rows = results[1 if plan.trains else 0] if _model_names(plan) else []
    return render(plan, sig, classes_rows, model_names(plan, results))
