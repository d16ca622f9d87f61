"""``python -m gradcli.language > grammars/gradcli.tables.json``: the parser tables."""

import sys

from .grammar import parser_tables

sys.stdout.write(parser_tables())
