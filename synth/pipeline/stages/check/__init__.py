"""Check phase: gold solutions and verifiers, the check loop and its agents (tests, judge, rewards)."""
