"""A Spark standalone cluster on 127.0.0.1, started and watched by Tideline."""
