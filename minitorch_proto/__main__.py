"""``python -m minitorch_proto <command>``: the CLI, also the entry point for ``torchrun -m minitorch_proto``."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
