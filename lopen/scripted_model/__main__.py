"""``python -m lopen.scripted_model --playbook PATH`` — same as ``bin/scripted-model``."""

import sys

from lopen.scripted_model.server import main

sys.exit(main())
