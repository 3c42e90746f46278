"""The server-rendered web pages (every HTML route; server/api holds only JSON routes), and
their helpers: rendering and security headers, view models built from the services, the inline
detailed-results report. Pages read through the same services as the JSON API and never
re-implement their rules.
"""
