"""The starting kit: the `arena` command line, baselines, the sample-data generator and the
digits converter. It depends on `submission_api` alone, so it runs on a participant's laptop."""
