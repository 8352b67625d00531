"""Hypothesis profiles: CI runs derandomized (the same examples every run, so a landing is
reproducible); local runs draw fresh examples each time and so keep exploring."""
import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_addoption(parser):
    parser.addoption("--fuzz", type=int, default=5_000, metavar="N",
                     help="rule applications the soundness fuzzer makes (tests/search/test_fuzz.py; default 5000)")
    parser.addoption("--fuzz-long", action="store_true", default=False,
                     help="the random-program fuzz (tests/testing/test_fuzz.py) on 20 times as many programs "
                          "(also: NAPKIN_FUZZ_LONG=1, or NAPKIN_FUZZ_SCALE=<factor>)")
