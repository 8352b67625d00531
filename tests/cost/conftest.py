"""The cost tests' helpers (``stair_routes``: the integer search's second routes) on the path."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
