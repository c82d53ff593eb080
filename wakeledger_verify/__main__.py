import sys

from wakeledger_verify.cli import main

sys.exit(main())
