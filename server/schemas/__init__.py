"""API schemas (pydantic), apart from the table models: what goes over the wire."""
