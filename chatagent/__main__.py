"""`python -m chatagent ...` runs the `chatagent` command."""

from chatagent.cli import main

raise SystemExit(main())
