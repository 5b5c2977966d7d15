"""JSON Schema from Python signatures, compiled validators and canonical JSON digests."""

from .canonical import argument_digest, canonical_json, digest
from .docstrings import ParsedDocstring, parse_docstring
from .from_callable import FunctionSchema, function_schema, to_jsonable
from .validate import (
    SchemaError,
    Validator,
    Violation,
    apply_defaults,
    compile_validator,
    json_pointer,
)

__all__ = [
    "FunctionSchema",
    "ParsedDocstring",
    "SchemaError",
    "Validator",
    "Violation",
    "apply_defaults",
    "argument_digest",
    "canonical_json",
    "compile_validator",
    "digest",
    "function_schema",
    "json_pointer",
    "parse_docstring",
    "to_jsonable",
]
