"""``python -m napkin_cat.cli``: the ``napkin`` command."""
from napkin_cat.cli import entry

entry()
