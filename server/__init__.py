"""The MetaDL Arena server: HTTP API, auth, database models and migrations, web pages.

It stores submissions and enqueues evaluation jobs by name; it never executes participant code
and never imports the worker's pipeline.
"""
