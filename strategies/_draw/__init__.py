"""Drawing an ATen graph: which call comes next, with which operands and arguments, for which device.

``draw.py`` draws a graph step by step from validated options (``aten_graphs``); ``call.py`` one
call of a catalog row, by the rule of its call kind (``calls.py``, ``compute_calls.py``) or of each
argument's kind (``args.py``), its operands picked or made by ``operands.py``; ``chains.py``
several nodes as a decomposition leaves them; ``focus.py`` and ``seeds.py`` what a focused draw
favours and the user's example programs; ``features.py`` what a drawn graph really has;
``case.py`` the drawn ``GraphCase``; ``support.py`` what a device runs, and ``probe.py`` (with
``probe_worker.py``) how that table is learned from the device. The public ``graphs()`` sits
above, in ``_graphs.py``.
"""
