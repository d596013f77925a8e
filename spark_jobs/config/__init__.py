"""The settings language: durations and (soon) typed setting declarations."""
