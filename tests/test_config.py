"""Configuration of CONTRACTS.md section 1: layers, env parsing, deep merge and clear errors."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from spark_jobs.settings import DEFAULTS, ConfigError, deep_merge, load_settings

SECOND, MINUTE, DAY = 1_000, 60_000, 86_400_000


def write(tmp_path: Path, text: str, name: str = "tideline.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# -- defaults ---------------------------------------------------------------------------
def test_defaults_are_the_production_values():
    """With no file and no env, every setting has the documented default."""
    s = load_settings(environ={})
    assert s.kafka.bootstrap == "127.0.0.1:19092"
    assert s.kafka.client == {}
    assert s.spark.master == "local[*]"
    assert s.spark.conf == {}
    assert s.lake.root == "./lake"
    assert s.lake.checkpoints == "./lake/_checkpoints"
    assert s.lake.snapshots == "./lake/ramp_snapshots"
    assert s.metadata.url == "sqlite:///./lake/metadata.db"
    e = s.experiments
    assert e.period_ms == 3 * DAY
    assert e.window_ms == 15 * MINUTE
    assert e.lateness_ms == 10 * MINUTE
    assert e.dedup_ttl_ms == 5 * MINUTE
    assert e.cap_per_user_hour == 1000
    assert e.critical_event_types == ("impression", "click", "save", "search")


def test_environ_none_reads_os_environ(monkeypatch):
    """Without an explicit environ the process environment is used (monkeypatched here)."""
    monkeypatch.setenv("TIDELINE_SPARK__MASTER", "spark://m:7077")
    monkeypatch.delenv("TIDELINE_CONFIG", raising=False)
    assert load_settings().spark.master == "spark://m:7077"


def test_loading_never_mutates_the_defaults():
    """Deep merges copy: one job's overrides must not leak into the next load in-process."""
    before = copy.deepcopy(DEFAULTS)
    load_settings(
        environ={"TIDELINE_KAFKA__CLIENT__X": "1"},
        overrides={"kafka": {"client": {"y": 2}}, "spark": {"conf": {"a": "b"}}},
    )
    assert before == DEFAULTS
    assert load_settings(environ={}).kafka.client == {}


# -- layers -----------------------------------------------------------------------------
def test_yaml_file_via_tideline_config(tmp_path):
    """The file named by TIDELINE_CONFIG overrides the defaults it mentions, nothing else."""
    path = write(tmp_path, "experiments:\n  window: 5m\n  period: PT2H\nspark:\n  master: x\n")
    s = load_settings(environ={"TIDELINE_CONFIG": path})
    assert s.experiments.window_ms == 5 * MINUTE
    assert s.experiments.period_ms == 2 * 60 * MINUTE
    assert s.experiments.lateness_ms == 10 * MINUTE
    assert s.spark.master == "x"


def test_empty_yaml_file_means_defaults(tmp_path):
    """An empty (or comment-only) config file is valid and changes nothing."""
    path = write(tmp_path, "# nothing yet\n")
    assert load_settings(environ={"TIDELINE_CONFIG": path}) == load_settings(environ={})


def test_priority_defaults_file_env_overrides(tmp_path):
    """defaults < file < env < overrides, each layer winning over the previous one per key."""
    path = write(
        tmp_path,
        "experiments:\n  window: 5m\n  lateness: 1m\n  dedup_ttl: 2m\n  cap_per_user_hour: 7\n",
    )
    environ = {
        "TIDELINE_CONFIG": path,
        "TIDELINE_EXPERIMENTS__LATENESS": "30s",
        "TIDELINE_EXPERIMENTS__DEDUP_TTL": "20s",
    }
    s = load_settings(environ=environ, overrides={"experiments": {"dedup_ttl": "3s"}})
    assert s.experiments.period_ms == 3 * DAY  # default
    assert s.experiments.window_ms == 5 * MINUTE  # file
    assert s.experiments.cap_per_user_hour == 7  # file
    assert s.experiments.lateness_ms == 30 * SECOND  # env beats file
    assert s.experiments.dedup_ttl_ms == 3 * SECOND  # overrides beat env


def test_kafka_bootstrap_from_env():
    """The contract's own example: TIDELINE_KAFKA__BOOTSTRAP=host:9092 stays a string."""
    s = load_settings(environ={"TIDELINE_KAFKA__BOOTSTRAP": "host:9092"})
    assert s.kafka.bootstrap == "host:9092"
    s = load_settings(environ={"TIDELINE_KAFKA__BOOTSTRAP": " a:1,b:2 "})
    assert s.kafka.bootstrap == "a:1,b:2"


def test_env_values_are_yaml_ints_booleans_lists_maps():
    """Env values are parsed as YAML, so typed values need no special syntax."""
    environ = {
        "TIDELINE_EXPERIMENTS__CAP_PER_USER_HOUR": "25",
        "TIDELINE_EXPERIMENTS__CRITICAL_EVENT_TYPES": "[click, save]",
        "TIDELINE_SPARK__CONF": "{spark.ui.enabled: false, spark.sql.shuffle.partitions: 4}",
        "TIDELINE_KAFKA__CLIENT__ENABLE.IDEMPOTENCE": "true",
    }
    s = load_settings(environ=environ)
    assert s.experiments.cap_per_user_hour == 25
    assert s.experiments.critical_event_types == ("click", "save")
    assert s.spark.conf == {"spark.ui.enabled": False, "spark.sql.shuffle.partitions": 4}
    assert s.kafka.client == {"enable.idempotence": True}


def test_comma_separated_event_types_also_work():
    """`click,save` (a plain string in YAML) is split into names, blanks dropped."""
    s = load_settings(environ={"TIDELINE_EXPERIMENTS__CRITICAL_EVENT_TYPES": "click, save,,"})
    assert s.experiments.critical_event_types == ("click", "save")


def test_bare_zero_is_a_duration_but_other_bare_numbers_need_a_unit():
    """`TIDELINE_EXPERIMENTS__LATENESS=0` is YAML int 0: a zero lateness, not an error; the
    contract has no unit-less durations, so `900` is refused instead of read as 900 ms."""
    s = load_settings(environ={"TIDELINE_EXPERIMENTS__LATENESS": "0"})
    assert s.experiments.lateness_ms == 0
    message = assert_config_error(
        "experiments.window", environ={"TIDELINE_EXPERIMENTS__WINDOW": "60000"}
    )
    assert "no unit" in message


def test_unrelated_env_vars_are_ignored():
    """Only TIDELINE_<SECTION>__<KEY> names are settings; others (and TIDELINE_CONFIG) are not."""
    environ = {"PATH": "/bin", "TIDELINE_HOME": "/x", "KAFKA__BOOTSTRAP": "nope:1"}
    assert load_settings(environ=environ) == load_settings(environ={})


def test_maps_are_deep_merged_across_all_layers(tmp_path):
    """kafka.client from file, env and overrides combine key by key (security + sasl split)."""
    path = write(
        tmp_path,
        "kafka:\n  client:\n    security.protocol: SASL_SSL\n    sasl.mechanism: PLAIN\n",
    )
    environ = {
        "TIDELINE_CONFIG": path,
        "TIDELINE_KAFKA__CLIENT": "{sasl.username: u}",
        "TIDELINE_KAFKA__CLIENT__SASL.MECHANISM": "SCRAM-SHA-512",
    }
    s = load_settings(environ=environ, overrides={"kafka": {"client": {"sasl.password": "p"}}})
    assert s.kafka.client == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "u",
        "sasl.password": "p",
    }
    assert s.kafka.bootstrap == "127.0.0.1:19092"  # sibling keys survive


@pytest.mark.parametrize("reverse", [False, True])
def test_env_map_and_nested_key_do_not_depend_on_environ_order(reverse):
    """A whole-map env var and a nested-key env var combine the same way in any order."""
    items = [
        ("TIDELINE_KAFKA__CLIENT", "{a: 1, b: 2}"),
        ("TIDELINE_KAFKA__CLIENT__B", "3"),
    ]
    environ = dict(reversed(items) if reverse else items)
    assert load_settings(environ=environ).kafka.client == {"a": 1, "b": 3}


def test_deep_merge_replaces_non_maps_and_copies():
    """Lists and scalars replace; maps merge; the inputs are never modified."""
    base = {"a": {"x": 1, "y": [1, 2]}, "b": 1}
    over = {"a": {"y": [3], "z": {"k": 1}}, "b": {"now": "map"}}
    merged = deep_merge(base, over)
    assert merged == {"a": {"x": 1, "y": [3], "z": {"k": 1}}, "b": {"now": "map"}}
    merged["a"]["z"]["k"] = 99
    assert over["a"]["z"]["k"] == 1
    assert base == {"a": {"x": 1, "y": [1, 2]}, "b": 1}


# -- derived paths ----------------------------------------------------------------------
def test_lake_paths_derive_from_root():
    """Checkpoints, snapshots and the metadata DB follow lake.root unless set explicitly."""
    s = load_settings(environ={"TIDELINE_LAKE__ROOT": "s3://bucket/tide/"})
    assert s.lake.checkpoints == "s3://bucket/tide/_checkpoints"
    assert s.lake.snapshots == "s3://bucket/tide/ramp_snapshots"
    assert s.lake.table("experiment_metrics") == "s3://bucket/tide/experiment_metrics"
    assert s.lake.checkpoint("filter_events") == "s3://bucket/tide/_checkpoints/filter_events"


def test_local_root_derives_metadata_url(tmp_path):
    """The default metadata DB lives next to the tables of the configured lake."""
    s = load_settings(environ={}, overrides={"lake": {"root": str(tmp_path)}})
    assert s.metadata.url == f"sqlite:///{tmp_path}/metadata.db"
    assert s.lake.table("dead_letters") == f"{tmp_path}/dead_letters"


def test_explicit_lake_paths_win():
    """Setting checkpoints, snapshots or metadata.url explicitly is not overwritten."""
    s = load_settings(
        environ={},
        overrides={
            "lake": {"root": "/l", "checkpoints": "/c/", "snapshots": "/s"},
            "metadata": {"url": "postgresql://db/meta"},
        },
    )
    assert s.lake.checkpoint("job") == "/c/job"
    assert s.lake.snapshots == "/s"
    assert s.metadata.url == "postgresql://db/meta"


# -- errors -----------------------------------------------------------------------------
def assert_config_error(names: str, **kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(**kwargs)
    message = str(info.value)
    assert names in message.splitlines()[0], message
    return message


def test_unknown_section_names_it_and_the_known_ones():
    """A typo in a section (env or file) fails at start instead of being ignored."""
    message = assert_config_error("'kafak'", environ={"TIDELINE_KAFAK__BOOTSTRAP": "h:1"})
    assert "experiments" in message


def test_unknown_key_names_section_and_key(tmp_path):
    """A misspelt key names section.key and lists the valid keys."""
    message = assert_config_error(
        "experiments.windows", environ={"TIDELINE_EXPERIMENTS__WINDOWS": "5m"}
    )
    assert "window" in message
    path = write(tmp_path, "spark:\n  mastr: local\n")
    assert_config_error("spark.mastr", environ={"TIDELINE_CONFIG": path})
    assert_config_error("lake.rot", environ={}, overrides={"lake": {"rot": "/x"}})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("experiments.period", "3 days"),
        ("experiments.window", "15min"),
        ("experiments.lateness", "-1m"),
        ("experiments.dedup_ttl", "true"),
        ("experiments.lateness", "1.5"),
        ("jobs.trigger", "soon"),
        ("jobs.snapshot_refresh", "[1s]"),
    ],
)
def test_bad_duration_names_the_key(key, value):
    """A bad duration from env names the key and how to write one."""
    section, name = key.split(".")
    message = assert_config_error(
        key, environ={f"TIDELINE_{section.upper()}__{name.upper()}": value}
    )
    assert any(
        hint in message for hint in ("ms, s, m, h or d", "negative", "not a duration", "no unit")
    )


@pytest.mark.parametrize(
    "key", ["experiments.period", "experiments.window", "jobs.snapshot_refresh"]
)
def test_zero_is_refused_where_a_positive_duration_is_needed(key):
    """A zero period or window would divide by zero later; fail at start instead."""
    section, name = key.split(".")
    assert_config_error(key, environ={}, overrides={section: {name: "0"}})


def test_window_longer_than_period_is_refused():
    """A window longer than the period cannot hold the period end; name both keys."""
    message = assert_config_error(
        "experiments.window", environ={}, overrides={"experiments": {"window": "4d"}}
    )
    assert "experiments.period" in message


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("experiments.cap_per_user_hour", "0"),
        ("experiments.cap_per_user_hour", "-3"),
        ("experiments.cap_per_user_hour", "1.5"),
        ("experiments.cap_per_user_hour", "true"),
        ("experiments.cap_per_user_hour", "many"),
        ("kafka.partitions", "0"),
        ("jobs.max_records_per_trigger", "null"),
        ("jobs.compact_every_batches", "-1"),
    ],
)
def test_non_positive_or_non_int_counts_name_the_key(key, value):
    """Counts must be positive ints; booleans (YAML `true`) are not ints here."""
    section, name = key.split(".")
    message = assert_config_error(
        key, environ={f"TIDELINE_{section.upper()}__{name.upper()}": value}
    )
    assert "positive integer" in message


@pytest.mark.parametrize("value", ["[]", "''", "[1, 2]", "{a: 1}"])
def test_bad_event_type_list_names_the_key(value):
    """An empty or non-string list of critical event types would filter out everything."""
    assert_config_error(
        "experiments.critical_event_types",
        environ={"TIDELINE_EXPERIMENTS__CRITICAL_EVENT_TYPES": value},
    )


@pytest.mark.parametrize(("key", "value"), [("kafka.client", "[a]"), ("spark.conf", "5")])
def test_non_map_client_settings_name_the_key(key, value):
    """kafka.client and spark.conf must be maps, since they are passed through key by key."""
    section, name = key.split(".")
    assert_config_error(key, environ={f"TIDELINE_{section.upper()}__{name.upper()}": value})


def test_null_client_map_means_empty():
    """`client:` left empty in YAML is null, which means no extra settings."""
    s = load_settings(environ={"TIDELINE_KAFKA__CLIENT": "null"})
    assert s.kafka.client == {}


@pytest.mark.parametrize("value", ["''", "[h:1]", "   "])
def test_bad_bootstrap_names_the_key(value):
    """An empty or non-text bootstrap cannot reach a broker."""
    assert_config_error("kafka.bootstrap", environ={"TIDELINE_KAFKA__BOOTSTRAP": value})


def test_missing_file_names_the_path(tmp_path):
    """A TIDELINE_CONFIG pointing nowhere fails with the variable and the path, not defaults."""
    missing = str(tmp_path / "nope.yaml")
    message = assert_config_error(missing, environ={"TIDELINE_CONFIG": missing})
    assert "TIDELINE_CONFIG" in message
    assert_config_error(str(tmp_path), environ={"TIDELINE_CONFIG": str(tmp_path)})


def test_invalid_yaml_file_names_the_path(tmp_path):
    """A broken config file names the file (and YAML says where inside it)."""
    path = write(tmp_path, "experiments:\n  window: [5m\n")
    assert_config_error(path, environ={"TIDELINE_CONFIG": path})


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n", "42\n"])
def test_yaml_file_must_be_a_map(tmp_path, text):
    """The top level of the file is a map of sections, not a list or a scalar."""
    path = write(tmp_path, text)
    assert_config_error(path, environ={"TIDELINE_CONFIG": path})


def test_section_must_be_a_map(tmp_path):
    """`experiments: 5` names the section that must be a map."""
    path = write(tmp_path, "experiments: 5\n")
    assert_config_error("'experiments'", environ={"TIDELINE_CONFIG": path})


@pytest.mark.parametrize("text", ["[click, save", "{a: 1", "a: b: c"])
def test_invalid_yaml_env_value_names_the_variable(text):
    """An env value that is not YAML names the variable, without dumping the value."""
    assert_config_error(
        "TIDELINE_EXPERIMENTS__CRITICAL_EVENT_TYPES",
        environ={"TIDELINE_EXPERIMENTS__CRITICAL_EVENT_TYPES": text},
    )


def test_nested_env_key_under_a_scalar_env_value_is_a_config_error():
    """Conflicting env vars (a scalar and a key inside it) fail with a ConfigError, not a crash."""
    for environ in (
        {"TIDELINE_KAFKA__CLIENT": "5", "TIDELINE_KAFKA__CLIENT__X": "1"},
        {"TIDELINE_KAFKA__CLIENT__X": "1", "TIDELINE_KAFKA__CLIENT": "5"},
    ):
        assert_config_error("TIDELINE_KAFKA__CLIENT", environ=environ)


def test_config_error_is_a_value_error():
    """The CLI turns ValueErrors into a one-line reason and a non-zero exit."""
    assert issubclass(ConfigError, ValueError)


# -- control-plane sections (alerts, airflow, validation, monitor, maintenance) ----------
def test_control_plane_defaults():
    s = load_settings(environ={})
    assert (s.alerts.webhook_url, s.alerts.email_to) == (None, ())
    assert s.airflow.base_url == "http://127.0.0.1:8080"
    assert s.airflow.home.endswith("infra/airflow_home")
    assert s.validation.max_drift == 0.02
    assert s.validation.data_docs == "./lake/_data_docs"
    assert s.monitor.stale_after_ms == 3 * MINUTE and s.monitor.restart_limit == 3
    assert s.maintenance.vacuum_retention_ms == 7 * DAY


def test_control_plane_values_from_the_environment():
    s = load_settings(environ={
        "TIDELINE_VALIDATION__MAX_DRIFT": "0.05",
        "TIDELINE_VALIDATION__START_DATE": "2026-01-01",
        "TIDELINE_ALERTS__EMAIL_TO": "a@x.org,b@y.org",
        "TIDELINE_AIRFLOW__PORT": "18080",
    })
    assert s.validation.max_drift == 0.05
    assert s.validation.start_date == "2026-01-01"
    assert s.alerts.email_to == ("a@x.org", "b@y.org")
    assert s.airflow.run_url("daily_validation", "scheduled__2026-01-01T00:00:00+00:00") == (
        "http://127.0.0.1:18080/dags/daily_validation/runs/"
        "scheduled__2026-01-01T00%3A00%3A00%2B00%3A00"
    )


@pytest.mark.parametrize(
    ("section", "values", "message"),
    [
        ("validation", {"max_drift": 2}, r"validation\.max_drift must be a fraction"),
        ("validation", {"max_drift": "2%"}, r"validation\.max_drift must be a fraction"),
        ("validation", {"start_date": "yesterday"}, r"validation\.start_date must be a date"),
        ("monitor", {"stale_after": 90}, r"monitor\.stale_after: 90 has no unit"),
        ("monitor", {"max_lag": -1}, r"monitor\.max_lag must be a positive integer"),
        ("alerts", {"email_to": ["nobody"]}, r"alerts\.email_to must be a list of e-mail"),
        ("airflow", {"port": "http"}, r"airflow\.port must be a port number \(1-65535\)"),
        ("airflow", {"port": 70000}, r"airflow\.port must be a port number \(1-65535\)"),
        ("alerts", {"webhook_url": "ftp://x"}, r"alerts\.webhook_url must be an http"),
        ("airflow", {"host": "airflow.example"}, r"airflow\.host must be an IP address"),
        ("dashboard", {"host": "0.0.0.0:8050"}, r"dashboard\.host must be an IP address"),
        ("kafka", {"broker_bind": "everywhere"}, r"kafka\.broker_bind must be an IP address"),
    ],
)
def test_wrong_control_plane_values_say_what_to_fix(section, values, message):
    with pytest.raises(ConfigError, match=message):
        load_settings(environ={}, overrides={section: values})


def test_samples_defaults_follow_the_contract():
    s = load_settings(environ={}).samples
    assert (s.window_ms, s.lateness_ms) == (10 * MINUTE, 2 * MINUTE)
    assert s.dedup_ttl_ms == 24 * 60 * MINUTE
    assert s.signals == ("like", "share", "comment", "favorite", "play", "skip")
    assert (s.compression, s.min_match_rate) == ("zstd", 0.999)


@pytest.mark.parametrize(
    "values, message",
    [
        ({"signals": ["like", "like"]}, "samples.signals"),
        ({"signals": ["a-b"]}, "samples.signals"),
        ({"signals": []}, "samples.signals"),
        ({"compression": "brotli"}, "samples.compression must be one of"),
        ({"min_match_rate": 1.5}, "samples.min_match_rate"),
        ({"window": "0"}, "samples.window"),
        ({"dedup_ttl": "0"}, "samples.dedup_ttl"),
        ({"dedup_ttl": "5m"}, "samples.dedup_ttl must not be shorter than samples.window"),
    ],
)
def test_wrong_samples_values_say_what_to_fix(values, message):
    with pytest.raises(ConfigError, match=message):
        load_settings(environ={}, overrides={"samples": values})


def test_monitor_jobs_default_to_the_experiment_pipeline_and_are_checked():
    assert load_settings(environ={}).monitor.jobs == (
        "filter_events", "filter_activations", "experiment_metrics")
    chosen = load_settings(environ={"TIDELINE_MONITOR__JOBS": "[training_samples, fraud_rules]"})
    assert chosen.monitor.jobs == ("fraud_rules", "training_samples"), "pipeline order"
    for wrong in (["nope"], ["fraud_rules", "fraud_rules"], []):
        with pytest.raises(ConfigError, match=r"monitor\.jobs"):
            load_settings(environ={}, overrides={"monitor": {"jobs": wrong}})


@pytest.mark.parametrize(("location", "local"), [
    ("/tmp/lake/_checkpoints", True), ("relative/ckpt", True), ("file:///tmp/ck", True),
    ("FILE:/tmp/ck", True), ("s3a://bucket/ck", False), ("hdfs:/x", False),
    ("gs://b/c", False), ("abfss://c@a.dfs.core.windows.net/ck", False),
])
def test_only_local_checkpoints_get_the_local_checkpoint_file_manager(location, local):
    from spark_jobs.streaming.spark_session import is_local_path

    assert is_local_path(location) is local


def test_servers_bind_loopback_unless_configured():
    """Bind addresses (issue 16): loopback by default; 0.0.0.0 in a container, where links
    and the task processes still reach the servers through loopback."""
    s = load_settings(environ={})
    assert (s.kafka.broker_bind, s.airflow.host, s.dashboard.host) == ("127.0.0.1",) * 3
    wide = load_settings(environ={"TIDELINE_KAFKA__BROKER_BIND": "0.0.0.0",
                                  "TIDELINE_AIRFLOW__HOST": "0.0.0.0",
                                  "TIDELINE_DASHBOARD__HOST": " ::1 "})
    assert (wide.kafka.broker_bind, wide.airflow.host, wide.dashboard.host) == (
        "0.0.0.0", "0.0.0.0", "::1")
    assert wide.airflow.base_url == "http://127.0.0.1:8080"
