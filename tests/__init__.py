"""The project's own tests: the strategies draw what they claim and shrink, every oracle and property
catches its planted bugs and passes correct passes, the search, the CLI and the plugin behave as
documented, and the docs' examples print what they show. ``tests/passes/`` holds the planted and
correct passes; ``pointwise_cases.py`` the pointwise lowering's fixed cases.
"""
