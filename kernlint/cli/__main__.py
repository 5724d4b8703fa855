"""`python -m kernlint.cli`: the command line, as the `kernlint` script runs it."""
from kernlint.cli import main

if __name__ == "__main__":  # pragma: no cover
    main()
