"""Loss reports of the dialects: `Loss`, `Converted`, `LossError`.

They are defined in `toolkeeper.schema.losses`, next to the schema walker that produces most of
them, and re-exported here because every conversion of this package returns them.
"""

from ..schema.losses import Action, Converted, Loss, LossError, prefixed

__all__ = ["Action", "Converted", "Loss", "LossError", "prefixed"]
