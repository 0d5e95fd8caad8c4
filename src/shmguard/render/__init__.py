"""Renderers: turn library results into text, JSON and config snippets. The library never prints."""
