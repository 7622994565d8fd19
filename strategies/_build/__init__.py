"""One graph under construction: every node computed in eager, and checked against fake tensors, as it is added.

``builder.py`` holds ``GraphBuilder`` (values, inputs, constants, calls, the aliasing it tracks);
``eager.py`` one eager call of the generator (what may kill the process, the trial run, the watch a
driver keeps on it, torch's logs of refusals); ``meta.py`` the shared fake mode and ``meta['val']``;
``device.py`` the device a graph is drawn for (placement, generators, kernels, the hook through
which the builder reports every call). It reads the catalog's vocabulary and knows nothing of how
calls are chosen (``_draw``).
"""
