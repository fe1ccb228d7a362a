"""The catalog facts a TRAIN BY / PREDICT BY rewrite needs (corgipile.train's
signature, the models' classes), which ``corgipile proxy`` reads on the
client's own connection once it is idle (ProxySession.lookup sends the
batch and holds back its answers): which queries a plan needs, what their
answers say, and the text to send in place of the client's."""

from __future__ import annotations

from . import wire
from .rewrite import SIGNATURE_QUERY, Failure, Plan, Segment, classes_query, render
from .rewrite import signature_from_rows

__all__ = ["lookup_queries", "read_answers", "translate"]

Rows = list[list[str | None]]


def _model_names(plan: Plan) -> list[str]:
    return sorted({p.model_name for p in plan.predicts})


def lookup_queries(plan: Plan) -> list[str]:
    """The queries whose answers translate(plan, ...) needs, in its order."""
    queries = []
    if plan.trains:
        queries.append(SIGNATURE_QUERY)
    names = _model_names(plan)
    if names:
        queries.append(classes_query(names))
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


def translate(plan: Plan, results: list[Rows]) -> tuple[str, list[Segment]] | Failure:
    """rewrite.render with the answers to lookup_queries(plan)."""
    sig = signature_from_rows(results[0]) if plan.trains else None
    classes_rows = results[1 if plan.trains else 0] if _model_names(plan) else []
    return render(plan, sig, classes_rows)
