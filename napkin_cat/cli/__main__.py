"""``python -m napkin_cat.cli``: the ``napkin`` command (importing this module, as pdoc does, runs nothing)."""
from napkin_cat.cli import entry

if __name__ == "__main__":
    entry()
