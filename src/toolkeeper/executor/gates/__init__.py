"""The gates a call passes before it may run, one module each, in the order DESIGN.md fixes:

1 dedupe → 2 lookup → 3 authorize → 4 validate → 5 rules → 6 approval → 7 budget.

Each is a `steps.Gate`; `executor.build_pipeline` puts them in order.
"""

from .approval import approval
from .authorize import authorize
from .budget import budget
from .dedupe import dedupe
from .lookup import lookup
from .rules import rules
from .validate import validate

__all__ = ["approval", "authorize", "budget", "dedupe", "lookup", "rules", "validate"]
