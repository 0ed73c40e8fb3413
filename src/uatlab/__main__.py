"""python -m uatlab: the uatlab command line."""

import sys

from uatlab.cli import main

sys.exit(main())
