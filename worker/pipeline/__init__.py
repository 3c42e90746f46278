"""The evaluation pipeline of one run, as plain functions: fetch, prepare, execute, score,
publish, and `evaluate` orchestrating them. Celery appears only in `worker.tasks`; the real
collaborators are wired in `wiring`, tests pass fakes.
"""
