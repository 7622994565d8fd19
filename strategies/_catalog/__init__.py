"""The op catalog: what the strategies can draw, as data.

``vocabulary.py`` holds the words the catalog is written in (op categories, dtype groups, argument
kinds, value domains, the ``OpSpec`` row type); ``ops.py`` the catalog itself, one literal row per
ATen overload (``OPS``, ``rows_named``), and the quantize ops' overloads; ``aims.py`` the values a
focused draw aims at (ties, exact halves, integral floats). Nothing here draws a graph or runs an
op: the rooms above read these tables (``_build`` runs calls, ``_draw`` draws them).
"""
