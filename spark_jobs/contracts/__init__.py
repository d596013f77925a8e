"""The interfaces of CONTRACTS.md declared once: topics, tables and the topics' record schemas."""
