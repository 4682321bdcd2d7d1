"""The test suite. Imported before its conftest and every test module.

Bytecode is written even where PYTHONDONTWRITEBYTECODE is set (a container's
usual default): the suite's many processes (test workers, fork servers, bots,
the CLI) then read the compiled bot and tests instead of each compiling them
again, seconds of CPU apiece.
"""

import sys

sys.dont_write_bytecode = False
