"""python3 -m kconform"""

import sys

from kconform.commands.cli import main

sys.exit(main())
