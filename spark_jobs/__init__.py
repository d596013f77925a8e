"""Tideline: real-time experiment analytics and event-driven stream processing on Spark."""
