"""`python -m theval_mesh`: the `theval` command."""
import sys

from theval_mesh.commands.cli import main

sys.exit(main())
