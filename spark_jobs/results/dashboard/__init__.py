"""The experiment results dashboard: `tideline dashboard` on 127.0.0.1."""
