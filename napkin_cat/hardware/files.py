"""The hardware data files (GPU models, toy hierarchies, CPU models): TOML read safely, and their plain fields.

A data file is a UTF-8 TOML file of at most :data:`MAX_FILE_BYTES`; anything else (a folder, a missing file, a
binary file, a file of gigabytes, malformed TOML) is a :class:`~napkin_cat.errors.HardwareError` naming the
file.  The loaders (:mod:`~napkin_cat.hardware.model`, :mod:`~napkin_cat.hardware.toy`,
:mod:`~napkin_cat.hardware.cpu`) check each field against its schema; the helpers here check the fields that
are not quantities with units (:mod:`~napkin_cat.hardware.units`): text, whole numbers, tables.

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "x.toml")
>>> _ = open(path, "wb").write(b"\\xff\\xfe not text")
>>> read_toml(path, "hardware model")
Traceback (most recent call last):
...
napkin_cat.errors.HardwareError: .../x.toml: a hardware model file is UTF-8 text (TOML); this one is not ...
>>> text({"name": 3}, "name", "model.toml")
Traceback (most recent call last):
...
napkin_cat.errors.HardwareError: model.toml: name = 3 must be a string
"""
from __future__ import annotations

import os
import tomllib
from importlib import resources
from pathlib import Path

from napkin_cat.errors import HardwareError

#: the largest data file read: the shipped models are 2 to 3.5 kB, so a file past 1 MiB is not one (and
#: reading a file of gigabytes would exhaust memory)
MAX_FILE_BYTES = 1 << 20


def shipped(folder: str) -> list[str]:
    """The names of the data files the package ships in ``folder`` (``models``, ``cpus``, ``links``, ``hierarchies``).

    >>> "h100-sxm5" in shipped("models"), "nvlink4" in shipped("links")
    (True, True)
    """
    found = resources.files("napkin_cat.hardware") / folder
    return sorted(p.name[:-len(".toml")] for p in found.iterdir() if p.name.endswith(".toml"))


def read_shipped(folder: str, name: str) -> tuple[dict, str]:
    """The parsed shipped file ``folder/name.toml`` and the name it is reported by (``name.toml``)."""
    where = f"{name}.toml"
    return parse_toml((resources.files("napkin_cat.hardware") / folder / where).read_text(), where), where


def as_path(name_or_path, what: str) -> Path:
    """``name_or_path`` (a str or a path) as a :class:`Path`, else a HardwareError saying what ``what`` takes."""
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise HardwareError(f"a {what} is named (a str such as 'h100-sxm5') or given by the path of its .toml "
                            f"file, got {type(name_or_path).__name__} {name_or_path!r}")
    return Path(name_or_path)


def read_toml(path, what: str) -> tuple[dict, str]:
    """``(data, where)``: the parsed TOML of the file at ``path`` (a ``what`` file) and its name for messages."""
    path, where = Path(path), str(path)
    if not path.is_file():
        raise HardwareError(f"no {what} file at {where!r}")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise HardwareError(f"{where}: {size} bytes; a {what} file is at most {MAX_FILE_BYTES} bytes")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise HardwareError(f"{where}: a {what} file is UTF-8 text (TOML); this one is not ({e.reason} at byte "
                            f"{e.start})") from None
    except OSError as e:
        raise HardwareError(f"{where}: cannot read the {what} file ({e.strerror})") from None
    return parse_toml(text, where), where


def read_named(name_or_path, folder: str, what: str, *, plural: str, file_what: str | None = None,
               hint: str = "") -> tuple[dict, str]:
    """``(data, where)`` of the ``what`` data file given by path (a name ending ``.toml``, holding a ``/``, or naming
    a file that exists; read as a ``file_what`` file) or by name, case aside, among those shipped in ``folder``: every
    loader's one rule.  An unknown name is a HardwareError listing the shipped ``plural`` (``hint``: where to read
    the format).

    >>> read_named("H100-SXM5", "models", "hardware model", plural="models")[1]
    'h100-sxm5.toml'
    >>> read_named("b300", "models", "hardware model", plural="models")
    Traceback (most recent call last):
    ...
    napkin_cat.errors.HardwareError: no hardware model called 'b300'; shipped models are ... (or give the path of ...
    """
    path = as_path(name_or_path, what)
    if path.suffix == ".toml" or "/" in str(name_or_path) or path.exists():
        return read_toml(path, file_what or what)
    name = str(name_or_path).lower()
    if name not in shipped(folder):
        raise HardwareError(f"no {what} called {name!r}; shipped {plural} are {', '.join(shipped(folder))} (or give "
                            f"the path of a .toml file{hint})")
    return read_shipped(folder, name)


def parse_toml(text: str, where: str) -> dict:
    """The parsed TOML ``text`` of the file ``where``; malformed TOML is a HardwareError naming the place."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise HardwareError(f"{where}: not valid TOML ({e})") from None
    except RecursionError:
        raise HardwareError(f"{where}: not valid TOML (nested too deeply)") from None


def text(table: dict, key: str, where: str, *, default: str | None = None) -> str:
    """The string field ``key`` of ``table`` (``default`` when it is absent and a default is given)."""
    if key not in table and default is not None:
        return default
    value = table.get(key)
    if not isinstance(value, str):
        shown = "missing" if key not in table else f"{value!r}"
        raise HardwareError(f"{where}: {key} = {shown} must be a string")
    return value


def texts(table: dict, key: str, where: str) -> dict:
    """The table of strings ``key`` of ``table`` (free text such as ``[sources]``; empty when absent)."""
    value = table.get(key, {})
    if not isinstance(value, dict) or any(not isinstance(v, str) for v in value.values()):
        raise HardwareError(f"{where}: [{key}] must be a table of strings (free text), got {value!r}")
    return dict(value)


def whole(value, where: str, *, least: int = 1, most: int) -> int:
    """``value`` as an int ``least … most`` (a TOML integer; a float, a bool or a string is refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise HardwareError(f"{where} = {value!r} must be a whole number {least} … {most}")
    return value


def names(value, where: str, legal) -> tuple:
    """``value`` as a tuple of strings, each one of ``legal`` (a TOML array; a bare string is refused)."""
    if not isinstance(value, list) or any(not isinstance(v, str) for v in value):
        raise HardwareError(f"{where} = {value!r} must be an array of strings (one of {', '.join(legal)})")
    bad = [v for v in value if v not in legal]
    if bad:
        raise HardwareError(f"{where}: unknown {bad}; legal: {', '.join(legal)}")
    return tuple(value)


def known_fields(table, fields, where: str, what: str) -> dict:
    """``table`` (a TOML table) checked to have only ``fields`` (a misspelt field is an error, not ignored)."""
    if not isinstance(table, dict):
        raise HardwareError(f"{where}: {what} must be a table, got {table!r}")
    extra = sorted(set(table) - set(fields))
    if extra:
        raise HardwareError(f"{where}: {what} has unknown field(s) {extra}; its fields are {sorted(fields)}")
    return table
