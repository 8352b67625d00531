"""A progress bar over the entries of a long build (the report's sections, the gallery's entries).

The bar is a nicety: tqdm's where it is installed and asked for; otherwise the items themselves, so what is built
is the same either way (``list(progress(xs, enabled=e, unit=u)) == list(xs)``).

>>> list(progress(["a", "b"], enabled=False, unit="section"))
['a', 'b']
"""
from __future__ import annotations


def progress(items, *, enabled: bool, unit: str):
    """``items`` behind tqdm's bar counting ``unit`` s (left behind once done), or ``items`` unchanged where the bar
    is not ``enabled`` or tqdm is not installed."""
    if not enabled:
        return items
    try:
        from tqdm import tqdm
    except ImportError:   # the bar is a nicety; what is built is the same without it
        return items
    return tqdm(items, unit=unit, leave=False)
