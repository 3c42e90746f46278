"""The runner, split in two processes with a file contract between them (docs/internals.md):
`prepare` and `scorer` hold the labels (worker, `arena run`); `participant` runs the submission
(sandbox, subprocess). `local` is `arena run`. Import the modules directly: the participant side
must stay importable with numpy and torch alone.
"""
