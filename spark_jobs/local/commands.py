"""`tideline broker|demo|platform`: the local stack on embedded defaults."""

from __future__ import annotations

import argparse

from spark_jobs.config.cli_args import UsageError, port_number, positive_int, positive_number
from spark_jobs.settings import Settings


def bootstrap_port(bootstrap: str) -> int:
    """The port of the first kafka.bootstrap address, which the embedded broker listens on."""
    first = bootstrap.split(",")[0].strip()
    host, colon, port = first.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(
            f"kafka.bootstrap {first!r} has no port for the embedded broker: write host:port "
            "(e.g. 127.0.0.1:19092), or pass --port"
        )
    return int(port)


def cmd_broker(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.local.broker import serve_forever

    port = args.port if args.port is not None else bootstrap_port(settings.kafka.bootstrap)
    serve_forever(port, settings.kafka.broker_bind)
    return 0


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.local.demo import run_demo

    return run_demo(settings, rate=args.rate, seconds=args.seconds)


def cmd_platform(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.local.platform_stack import run_platform

    return run_platform(settings, users=args.users, seconds=args.seconds, cluster=args.cluster)


def register(commands: argparse._SubParsersAction) -> None:
    """Add the local stack's commands to `tideline`."""
    broker = commands.add_parser(
        "broker", help="start the embedded Kafka broker (Tansu)",
        description="Run the embedded Kafka broker (Tansu) in the foreground until Ctrl-C.",
        examples=("tideline broker", "tideline broker --port 19093"),
        reads=("kafka.bootstrap", "kafka.broker_bind"))
    broker.add_argument("--port", type=port_number,
                        help="port (default: kafka.bootstrap's; it listens on "
                             "kafka.broker_bind, 127.0.0.1 by default)")
    broker.set_defaults(func=cmd_broker)

    demo = commands.add_parser(
        "demo", help="run the whole pipeline on embedded defaults",
        description="Run the whole pipeline in one process on embedded defaults: broker, "
                    "metadata, streaming jobs, synthetic traffic and the dashboard.",
        examples=("tideline demo", "tideline demo --rate 500 --seconds 600"), reads=("*",))
    demo.add_argument("--rate", type=positive_number, default=2000.0, help="generator messages/s")
    demo.add_argument("--seconds", type=positive_number,
                      help="stop after this long (default: Ctrl-C)")
    demo.set_defaults(func=cmd_demo)

    platform = commands.add_parser(
        "platform",
        help="the whole platform on embedded defaults, managed in the Airflow UI: broker, "
             "metadata DB, Airflow, streaming jobs (deployed by its DAG), synthetic traffic",
        description="Start the whole platform on embedded defaults and keep it running until "
                    "Ctrl-C: broker, metadata DB, Airflow (which deploys the streaming jobs), "
                    "the dashboard and synthetic traffic following the clock. The Airflow "
                    "apps and jobs it starts read the same configuration.",
        examples=("tideline platform", "tideline platform --users 2000 --cluster"),
        reads=("*",),
    )
    platform.add_argument("--users", type=positive_int, default=10_000,
                          help="synthetic users (traffic follows the clock: ~20 msg/s per 1000)")
    platform.add_argument("--seconds", type=positive_number,
                          help="stop after this long (default: Ctrl-C)")
    platform.add_argument(
        "--cluster", action="store_true",
        help="start a Spark standalone cluster (section cluster) and run every Spark "
             "application there: the deployed streaming jobs (fraud_rules with fraud.state="
             "spark unless configured) and the daily recomputation; stopped on exit")
    platform.set_defaults(func=cmd_platform)
