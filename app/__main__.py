"""``python -m app`` runs the nicguard command line."""

import sys

from app.cli import main

sys.exit(main())
