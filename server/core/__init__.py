"""Settings, database and security: the server's foundations, built by factories at start-up."""
