"""The testing-layer tests' helpers (``known``: the known families of issue 25) on the path."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
