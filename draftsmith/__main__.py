"""``python -m draftsmith`` is the ``draftsmith`` command."""
from draftsmith.cli import main

main()
