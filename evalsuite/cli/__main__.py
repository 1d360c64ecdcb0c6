"""`python -m evalsuite.cli ...`: the same as the `evalsuite` command."""

from . import main

main()
