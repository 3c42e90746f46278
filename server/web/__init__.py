"""Helpers of the server-rendered web pages (server/api/pages.py): rendering and security
headers, view models built from the services, the inline detailed-results report, and the
organizer dashboard's routes. Pages read through the same services as the JSON API and never
re-implement their rules.
"""
