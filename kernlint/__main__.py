"""`python -m kernlint`: the same as the `kernlint` command."""
from kernlint.cli import main

if __name__ == "__main__":
    main()
