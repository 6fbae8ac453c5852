"""`python -m modelplan` is the same as the `modelplan` command."""

from modelplan.cli import main

main()
