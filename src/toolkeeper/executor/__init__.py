"""The executor: the ordered gate pipeline, run-and-record, retries and parallel batches."""

from .executor import Executor, build_pipeline
from .runtime import DEFAULT_MAX_ARGUMENT_BYTES, Runtime, idempotency_key

__all__ = ["DEFAULT_MAX_ARGUMENT_BYTES", "Executor", "Runtime", "build_pipeline", "idempotency_key"]
