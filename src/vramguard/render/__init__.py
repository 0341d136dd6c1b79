"""Renderers: take results, never compute them (text, JSON, HTML)."""
