"""The attention block of notebook 07, reused by the decoder of notebook 08."""
