"""The testing layer's tests: the fuzz (``test_fuzz.py``), the generator, the assertion, one regression test per
family of issue 25 and the typed errors."""
