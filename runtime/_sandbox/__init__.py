"""The OS isolation layers a worker applies to itself before it runs a program.

- ``_layers``: the layers in their fixed order, and the probe ``ptc doctor`` shows.
- ``_namespaces``: Linux namespaces and the private root file system.
- ``_seccomp``: the seccomp-BPF filter; ``_landlock``: the Landlock rule set.

Imports neither host nor worker code.
"""
