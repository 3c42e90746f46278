"""Names that zips written for the NeurIPS'22 starting kit import: `api` (their copied api.py
imports `cdmetadl.ingestion.data_generator.Task`) and `cdmetadl.*`. The participant runner puts
this folder on `sys.path` so such a zip runs unchanged.
"""
