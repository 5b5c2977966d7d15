"""JSON Schema from Python signatures, compiled validators and canonical JSON digests."""

from .canonical import canonical_json, digest
from .coerce import Coerced, Coercion, coerce
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
from .walker import KNOWN_KEYWORDS, SchemaWalker

__all__ = [
    "KNOWN_KEYWORDS",
    "Coerced",
    "Coercion",
    "FunctionSchema",
    "ParsedDocstring",
    "SchemaError",
    "SchemaWalker",
    "Validator",
    "Violation",
    "apply_defaults",
    "canonical_json",
    "coerce",
    "compile_validator",
    "digest",
    "function_schema",
    "json_pointer",
    "parse_docstring",
    "to_jsonable",
]
