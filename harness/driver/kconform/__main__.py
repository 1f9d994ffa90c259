"""python3 -m kconform"""

import sys

from kconform.cli import main

sys.exit(main())
