"""Settings: durations parsed once, flags over TOML over environment, errors name the key."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from slipstream.app.cli import main
from slipstream.core.specs import SinkSpec, TriggerSpec, parse_duration, spark_interval
from slipstream.errors import ConfigError
from slipstream.pipelines import get_pipeline
from slipstream.settings.config import load_settings


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("10m", 600),
        ("90s", 90),
        ("1h", 3600),
        ("10 minutes", 600),
        ("1 minute", 60),
        ("500ms", 0.5),
        ("2 hours", 7200),
        ("1.5s", 1.5),
        ("1d", 86400),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["10", "ten minutes", "10 parsecs", "-5m", "0s", ""])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "bound"),
    [
        ("99999999999d", "at most 3650 days"),  # was an OverflowError traceback
        ("3651d", "at most 3650 days"),
        ("1e300s", "duration such as"),
        ("0.4ms", "whole number of milliseconds"),  # was silently "0 seconds"
        ("1.5ms", "whole number of milliseconds"),
    ],
)
def test_durations_are_bounded_and_whole_milliseconds(text: str | float, bound: str) -> None:
    with pytest.raises(ValueError, match=bound):
        parse_duration(text)
    assert parse_duration("3650d") == timedelta(days=3650)


def test_an_out_of_bound_duration_flag_is_refused_naming_the_bound() -> None:
    with pytest.raises(ConfigError) as err:
        load_settings("mobile", {"duration": "99999999999d"}, environ={})
    assert err.value.code == "CONFIG_BAD_VALUE" and "at most 3650 days" in str(err.value)
    from slipstream.pipelines import get_pipeline

    with pytest.raises(ConfigError, match="whole number of milliseconds") as err:
        get_pipeline("mobile").parse_params({"window": "0.4ms"})
    assert "--window" in str(err.value)


def test_spark_interval_is_the_edge() -> None:
    assert spark_interval(timedelta(minutes=10)) == "600 seconds"
    assert spark_interval(timedelta(milliseconds=1500)) == "1500 milliseconds"


@pytest.mark.parametrize(
    ("text", "kind", "interval"),
    [
        ("default", "default", None),
        ("5s", "interval", 5),
        ("available-now", "available-now", None),
        ("once", "once", None),
        ("continuous:1s", "continuous", 1),
        ("real-time:5s", "real-time", 5),
        ("real-time", "real-time", 300),  # Spark's own default epoch
    ],
)
def test_triggers(text: str, kind: str, interval: float | None) -> None:
    spec = TriggerSpec.parse(text)
    assert spec.kind == kind
    assert spec.interval == (timedelta(seconds=interval) if interval else None)


def test_bad_parameter_value_names_key_value_and_allowed() -> None:
    settings = load_settings("mobile", {}, environ={}, params={"window": "ten minutes"})
    with pytest.raises(ConfigError) as err:
        get_pipeline("mobile").parse_params(settings.params)
    assert err.value.code == "CONFIG_BAD_VALUE"
    assert "--window" in err.value.message and "ten minutes" in err.value.message
    assert "duration" in err.value.message


def test_unknown_parameter_is_named_with_a_suggestion() -> None:
    with pytest.raises(ConfigError) as err:
        get_pipeline("mobile").parse_params({"watermrk": "5m"})
    assert err.value.code == "CONFIG_UNKNOWN_KEY" and "watermrk" in err.value.message
    assert "did you mean 'watermark'" in err.value.fix


def test_a_parameter_is_a_flag_of_its_own_pipeline_only(capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's example: `mobile --catalog /nonexistent --archive x --slide 1m` used to be
    accepted and silently ignored; each is now refused before anything runs."""
    for flag in ("--slide", "--catalog", "--archive"):
        assert main(["check", "mobile", flag, "1m"]) == 2
        err = capsys.readouterr().err
        assert f"[CONFIG_UNKNOWN_KEY] mobile has no parameter {flag}" in err
        assert "its parameters: --window, --watermark" in err
    assert "--slide DURATION" in _help(["run", "trending", "--help"], capsys)
    assert "--slide" not in _help(["run", "mobile", "--help"], capsys)
    assert "--window DURATION" in _help(["run", "mobile", "--help"], capsys)


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        main(argv)
    return capsys.readouterr().out


def test_named_values_keep_paths_and_urls_with_equals_whole() -> None:
    settings = load_settings(
        "trending",
        {
            "input": ["data/day=1", "catalog=cat.csv"],
            "sink": ["postgresql://app@db/x?sslmode=require", "archive=parquet:arch"],
            "mode": "update",
        },
        environ={},
    )
    assert settings.input == {"": Path("data/day=1"), "catalog": Path("cat.csv")}
    assert settings.sink[""].kind == "postgresql" and settings.sink[""].target is not None
    assert settings.sink["archive"] == SinkSpec.parse("parquet:arch")
    assert settings.mode == {"": "update"}


def test_bad_trigger_and_mode_and_port() -> None:
    for flags, key in (
        ({"trigger": "sometimes"}, "--trigger"),
        ({"mode": "upsert"}, "--mode"),
        ({"port": "99999"}, "--port"),
        ({"sink": "kafka:x"}, "--sink"),
    ):
        with pytest.raises(ConfigError) as err:
            load_settings("mobile", flags, environ={})
        assert err.value.code == "CONFIG_BAD_VALUE"
        assert key in err.value.message


def test_toml_file_and_flags_win(tmp_path: Path) -> None:
    config = tmp_path / "slipstream.toml"
    config.write_text(
        "max-files-per-trigger = 3\n"
        '[params]\nwindow = "5m"\nwatermark = "2 minutes"\n'
        '[inputs.catalog]\npath = "cat.csv"\n'
        '[outputs.archive]\nsink = "parquet:arch"\n'
        '[outputs.views]\nmode = "append"\ntable = "views_v2"\n'
        '[conf]\n"spark.sql.shuffle.partitions" = "3"\n'
    )
    flags = {"conf": ["a.b=c"], "input": "landing", "sink": "archive=parquet:other"}
    settings = load_settings("trending", flags, config, environ={}, params={"window": "1m"})
    params = get_pipeline("trending").parse_params(settings.params)
    assert params.window == timedelta(minutes=1)  # flag wins
    assert params.watermark == timedelta(minutes=2)  # from the file
    assert params.slide == timedelta(minutes=1)  # the pipeline's default
    assert settings.input == {"": Path("landing"), "catalog": Path("cat.csv")}
    assert settings.sink == {"archive": SinkSpec.parse("parquet:other")}  # flag wins, by name
    assert settings.mode == {"views": "append"} and settings.table == {"views": "views_v2"}
    assert settings.source_options["max_files_per_trigger"] == 3
    assert settings.conf == {"spark.sql.shuffle.partitions": "3", "a.b": "c"}


def test_unknown_toml_key_is_named_with_a_suggestion(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('sorce = "files"\n')
    with pytest.raises(ConfigError) as err:
        load_settings("mobile", {}, config, environ={})
    assert err.value.code == "CONFIG_UNKNOWN_KEY"
    assert "sorce" in err.value.message
    assert "source" in err.value.fix
    config.write_text('watermark = "5m"\n')  # a parameter outside [params]
    with pytest.raises(ConfigError, match="watermark") as err:
        load_settings("mobile", {}, config, environ={})
    assert "[params]" in err.value.fix
    config.write_text('[outputs.views]\nsinq = "sqlite:"\n')
    with pytest.raises(ConfigError, match="sinq") as err:
        load_settings("trending", {}, config, environ={})
    assert "sink" in err.value.fix


def test_bad_toml_value_names_the_key(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("rows-per-second = -3\n")
    with pytest.raises(ConfigError) as err:
        load_settings("mobile", {}, config, environ={})
    assert err.value.code == "CONFIG_BAD_VALUE" and "rows_per_second" in err.value.message


def test_environment_is_below_flags() -> None:
    env = {"SLIPSTREAM_STATE_DIR": "/tmp/from-env"}
    assert load_settings("mobile", {}, environ=env).state_dir == Path("/tmp/from-env")
    assert load_settings("mobile", {"state_dir": "x"}, environ=env).state_dir == Path("x")


def test_password_never_shows() -> None:
    spec = SinkSpec.parse("postgresql://app:s3cret@db.local:5432/metrics")
    assert spec.password is not None and spec.password.reveal() == "s3cret"
    for text in (
        repr(spec),
        str(spec),
        spec.describe(),
        repr(
            load_settings(
                "mobile", {"sink": "postgresql://app:s3cret@db.local:5432/metrics"}, environ={}
            )
        ),
    ):
        assert "s3cret" not in text
    with pytest.raises(ConfigError) as err:
        load_settings("mobile", {"sink": "postgresql://app:s3cret@/"}, environ={})
    assert "s3cret" not in str(err.value)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app:Zx9/Kq+v@db/x",  # urllib would quote 'Zx9' as a bad port
        "postgresql://app:1234/abc@db/x",  # would parse as host app, port 1234
        "postgresql://app:Qz7?xK9@db/x",
        "postgresql://app:Wv3#Lm8@db/x",
    ],
)
def test_a_password_with_url_characters_is_refused_without_a_fragment_of_it(url: str) -> None:
    password = url.split("://app:")[1].rsplit("@", 1)[0]
    with pytest.raises(ConfigError) as err:
        load_settings("mobile", {"sink": url}, environ={})
    text = str(err.value) + err.value.fix
    assert "percent-encoded" in text
    for fragment in {password, *password.replace("?", "/").replace("#", "/").split("/")}:
        assert fragment not in text.replace("postgresql://user[:password]@host[:port]/db", "")
    assert SinkSpec.parse("postgresql://app:Zx9%2FKq+v@db/x").password.reveal() == "Zx9/Kq+v"


def test_a_session_time_zone_other_than_utc_is_refused() -> None:
    """Stored timestamps end in Z: another session zone would shift them silently."""
    with pytest.raises(ConfigError) as err:
        load_settings("mobile", {"conf": ["spark.sql.session.timeZone=Europe/Paris"]}, environ={})
    assert err.value.code == "CONFIG_BAD_VALUE" and "Europe/Paris" in str(err.value)
    ok = load_settings("mobile", {"conf": ["spark.sql.session.timeZone=UTC"]}, environ={})
    assert ok.conf["spark.sql.session.timeZone"] == "UTC"


@pytest.mark.parametrize("flag", ["checkpoint", "state_dir", "quarantine"])
@pytest.mark.parametrize("uri", ["s3a://bucket/cp", "hdfs://namenode:8020/cp", "gs://b/cp"])
def test_a_remote_path_is_refused_not_read_as_a_local_folder(flag: str, uri: str) -> None:
    """Locks, reset and output marks work on the local file system: a URI is refused, naming
    the scheme, instead of becoming a folder named `s3a:` in the working directory."""
    with pytest.raises(ConfigError) as err:
        load_settings("mobile", {flag: uri}, environ={})
    assert err.value.code == "CONFIG_BAD_VALUE"
    scheme = uri.split(":")[0]
    assert f"{scheme}:// paths are not supported" in str(err.value)


def test_a_file_uri_is_its_local_path(tmp_path: Path) -> None:
    settings = load_settings(
        "mobile", {"checkpoint": f"file://{tmp_path}/c%20p", "input": f"file://{tmp_path}"},
        environ={},
    )  # fmt: skip
    assert settings.checkpoint == tmp_path / "c p"
    with pytest.raises(ConfigError, match="not local"):
        load_settings("mobile", {"checkpoint": "file://elsewhere/cp"}, environ={})


@pytest.mark.parametrize(
    ("toml_value", "why"),
    [
        ("1.5", "bare number"),  # was silently 1.5 seconds
        ("600", "bare number"),  # was silently 10 minutes
        ("0", "bare number"),
        ('"\uff11\uff10m"', "duration such as"),  # fullwidth "10m" was accepted as 10 minutes
        ('"\u0661\u0660m"', "duration such as"),  # Arabic-Indic digits
        ('"600"', "duration such as"),
    ],
)
def test_a_duration_without_its_unit_or_in_non_ascii_digits_is_refused(
    tmp_path: Path, toml_value: str, why: str
) -> None:
    """issue 29 item 15: durations are texts with a unit, in ASCII digits."""
    config = tmp_path / "slipstream.toml"
    config.write_text(f"[params]\nwindow = {toml_value}\n", encoding="utf-8")
    settings = load_settings("mobile", {}, config, environ={})
    with pytest.raises(ConfigError) as err:
        get_pipeline("mobile").parse_params(settings.params)
    assert err.value.code == "CONFIG_BAD_VALUE"
    assert "--window" in err.value.message and why in err.value.message
    assert "90s, 10m, 1h" in err.value.message  # the allowed forms
    config.write_text(f"max-future = {toml_value}\n", encoding="utf-8")  # a setting too
    with pytest.raises(ConfigError) as err:
        load_settings("mobile", {}, config, environ={})
    assert err.value.code == "CONFIG_BAD_VALUE" and "90s, 10m, 1h" in str(err.value)


def test_the_same_duration_in_ascii_with_its_unit_is_taken(tmp_path: Path) -> None:
    config = tmp_path / "slipstream.toml"
    config.write_text('max-future = "10m"\n[params]\nwindow = "1.5s"\n', encoding="utf-8")
    settings = load_settings("mobile", {}, config, environ={})
    assert settings.max_future == timedelta(minutes=10)
    assert get_pipeline("mobile").parse_params(settings.params).window == timedelta(seconds=1.5)


@pytest.mark.parametrize(
    "content",
    [
        "window = 'caf\xe9'\n".encode("latin-1"),  # latin-1, not UTF-8
        b"\xff\xfe[\x00p\x00",  # UTF-16 with its byte-order mark
    ],
)
def test_a_config_file_that_is_not_utf8_is_a_config_error(tmp_path: Path, content: bytes) -> None:
    """issue 29 item 8: was a UnicodeDecodeError traceback."""
    config = tmp_path / "slipstream.toml"
    config.write_bytes(content)
    with pytest.raises(ConfigError) as err:
        load_settings("mobile", {}, config, environ={})
    assert err.value.code == "CONFIG_FILE"
    assert "not UTF-8" in err.value.message and str(config) in err.value.message
    assert "UTF-8" in err.value.fix


def test_a_config_path_that_is_a_folder_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings("mobile", {}, tmp_path, environ={})
    assert err.value.code == "CONFIG_FILE" and "cannot be read" in err.value.message


@pytest.mark.parametrize(
    ("trigger", "watched"),
    [
        ("real-time", ["mobile.quarantine.actions"]),  # the output's batch is an epoch
        ("default", ["mobile.counts", "mobile.quarantine.actions"]),
    ],
)
def test_the_waiting_lines_watch_the_queries_that_run_micro_batches(
    trigger: str, watched: list[str]
) -> None:
    from types import SimpleNamespace

    from slipstream.runtime.bound import QueryKind
    from slipstream.runtime.writers import micro_batch_queries

    def query(name: str, kind: QueryKind) -> SimpleNamespace:
        return SimpleNamespace(
            kind=kind, is_output=kind is QueryKind.OUTPUT, ctx=SimpleNamespace(query_name=name)
        )

    prepared = SimpleNamespace(
        settings=load_settings("mobile", {"trigger": trigger}, environ={}),
        outputs={
            "counts": query("mobile.counts", QueryKind.OUTPUT),
            "quarantine.actions": query("mobile.quarantine.actions", QueryKind.INGEST),
        },
    )
    assert micro_batch_queries(prepared) == watched  # type: ignore[arg-type]
