"""probe monitor compare: read two monitor outputs, find where they part, report it."""
