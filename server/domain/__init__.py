"""The domain's value objects: plain data with their rules, free of the web and the database."""
