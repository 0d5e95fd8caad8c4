"""Failure triage: signatures as data files, matchers and the classifier behind ``explain``."""
