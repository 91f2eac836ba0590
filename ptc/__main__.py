"""``python -m ptc`` runs the ``ptc`` command line."""

from ._cli import main

main()
