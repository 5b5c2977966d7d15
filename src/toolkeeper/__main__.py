"""`python -m toolkeeper`: the `toolkeeper` command, for an environment without its script."""

from toolkeeper.cli import main

raise SystemExit(main())
