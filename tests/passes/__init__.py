"""Graph passes the tests verify: faulty ones with planted bugs, each beside a correct twin that must
never be flagged, for testing that the harness catches what it claims to catch and nothing else.
"""
