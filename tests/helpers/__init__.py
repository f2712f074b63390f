"""Helpers shared by tests in several folders (single-folder helpers live next to their tests)."""
