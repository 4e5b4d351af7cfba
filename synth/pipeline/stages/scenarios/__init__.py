"""Scenario phase: expand seed domains into scenarios, classify them, drop duplicates."""
