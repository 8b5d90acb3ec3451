"""`python -m headmovies ...` is the `headmovies` command."""

import sys

from headmovies.cli import main

sys.exit(main())
