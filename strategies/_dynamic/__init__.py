"""Graphs over symbolic sizes: drawn programs traced by ``make_fx(tracing_mode="symbolic")``.

``programs.py`` draws a program whose shape arguments are expressions of its inputs' sizes (or takes
one of the user's seed programs) and traces it symbolically; ``steps.py`` holds the rows those
programs are drawn from, per step kind; ``symshapes.py`` says which input sizes are symbols
(``SymbolicShapes``) and runs the graph at other sizes. ``graphs(dynamic=True)`` draws here.
"""
