"""`python -m switchover` entry point."""

from switchover.cli.app import main

if __name__ == "__main__":
    main()
