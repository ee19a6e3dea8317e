"""`python -m ranch` runs the command line."""

from ranch.cli import main

main()
