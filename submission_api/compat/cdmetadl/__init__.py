"""Compatibility names of the NeurIPS'22 Cross-Domain MetaDL starting kit."""
