"""``python -m draftsmith`` is the ``draftsmith`` command."""
from draftsmith.console import main

main()
