"""``python -m tenure``: the same command line as the ``tenure`` script."""

from .cli import main

if __name__ == "__main__":
    main()
