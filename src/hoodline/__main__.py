"""``python -m hoodline``: the same command line as the ``hoodline`` script."""

from hoodline.cli import main

if __name__ == "__main__":
    main()
