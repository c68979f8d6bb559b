"""Evals: datasets of cases, experiments that run them against a target and grade each case, and comparisons."""
