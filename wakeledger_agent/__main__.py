import sys

from wakeledger_agent.cli import main

sys.exit(main())
