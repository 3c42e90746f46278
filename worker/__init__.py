"""The evaluation worker: Celery jobs over a pipeline of plain functions.

fetch, prepare, sandbox (`worker.sandbox`, the only place participant code is started), score,
publish. Importing this package starts nothing.
"""
