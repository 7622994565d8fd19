"""Faulty FX passes with planted bugs, for testing that the harness catches them."""
