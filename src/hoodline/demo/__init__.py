"""Demos run by ``hoodline demo``."""
