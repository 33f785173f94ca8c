"""The `publish` command line: store naming, output, and one exit code per kind of outcome."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import TinyFilesystem, fill
from publish_testbed import Bucket

from publish.cli import main

EXIT_NOTHING, EXIT_FENCED, EXIT_INVALID, EXIT_UNAVAILABLE, EXIT_PROBE = 3, 4, 5, 6, 8


def _save_folder(tmp_path: Path, name: str = "s", content: bytes = b"w") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "model.bin").write_bytes(content)
    return folder


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def root(tmp_path: Path) -> str:
    return str(tmp_path / "root")


def test_resolve_with_nothing_published_exits_3(root: str) -> None:
    code, _, err = _run("resolve", "--store", root, "--epoch", "1000000")
    assert code == EXIT_NOTHING
    assert "no complete publication" in err


def test_save_then_resolve_json_reports_epoch_step_and_files(root: str, tmp_path: Path) -> None:
    code, out, _ = _run(
        "save",
        str(_save_folder(tmp_path)),
        "--step",
        "12",
        env={"PUBLISH_STORE": root, "DISPATCH_EPOCH": "3000001"},
    )
    assert code == 0 and "published" in out
    code, out, _ = _run(
        "resolve", "--json", env={"PUBLISH_STORE": root, "DISPATCH_EPOCH": "3000001"}
    )
    body = json.loads(out)
    assert code == 0
    assert (body["epoch"], body["step"]) == (3000001, 12)
    assert [f["path"] for f in body["files"]] == ["model.bin"]
    assert (Path(body["path"]) / "model.bin").read_bytes() == b"w"


def test_zombie_save_exits_4_and_publishes_nothing(root: str, tmp_path: Path) -> None:
    _run(
        "save",
        str(_save_folder(tmp_path, "a")),
        "--step",
        "1",
        "--store",
        root,
        "--epoch",
        "2000000",
    )
    code, _, err = _run(
        "save",
        str(_save_folder(tmp_path, "b")),
        "--step",
        "9",
        "--store",
        root,
        "--epoch",
        "1000003",
    )
    assert code == EXIT_FENCED
    assert "outranked" in err
    assert len(list((Path(root) / "log").iterdir())) == 1


@pytest.mark.parametrize("step", ["nine", "-1", "1.5", ""])
def test_save_with_a_step_that_is_not_a_number_exits_5_and_publishes_nothing(
    root: str, tmp_path: Path, step: str
) -> None:
    code, _, err = _run(
        "save", str(_save_folder(tmp_path)), "--step", step, "--store", root, "--epoch", "1000000"
    )
    assert code == EXIT_INVALID
    assert "step" in err
    assert not Path(root).exists()


def test_missing_epoch_exits_5_with_what_to_do(root: str, tmp_path: Path) -> None:
    code, _, err = _run("save", str(_save_folder(tmp_path)), "--step", "1", "--store", root)
    assert code == EXIT_INVALID
    assert "DISPATCH_EPOCH" in err


def test_missing_store_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = _run("resolve", "--epoch", "1")
    assert code == 2
    assert "--store" in err


def test_s3_round_trip_through_the_cli(s3_env: Bucket, tmp_path: Path) -> None:
    common = [
        "--store",
        s3_env.store_url,
        "--endpoint-url",
        s3_env.server.url,
        "--epoch",
        "1000000",
    ]
    code, _, err = _run("save", str(_save_folder(tmp_path, content=b"abc")), "--step", "4", *common)
    assert code == 0, err
    code, out, err = _run("resolve", "--into", str(tmp_path / "resume"), *common)
    assert code == 0, err
    assert out.strip() == str(tmp_path / "resume")
    assert (tmp_path / "resume" / "model.bin").read_bytes() == b"abc"


def test_s3_without_credentials_exits_6_naming_the_source(bucket: Bucket) -> None:
    code, _, err = _run(
        "resolve", "--store", bucket.store_url, "--endpoint-url", bucket.server.url, "--epoch", "1"
    )
    assert code == EXIT_UNAVAILABLE
    assert "env:" in err


def test_probe_prints_a_line_per_check_and_exits_0(s3_env: Bucket) -> None:
    code, out, _ = _run("probe", "--store", s3_env.store_url, "--endpoint-url", s3_env.server.url)
    assert code == 0
    assert len(out.splitlines()) == 7
    assert all(line.startswith("ok") for line in out.splitlines())


def test_probe_with_a_wrong_key_exits_8_without_printing_the_secret(
    bucket: Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", bucket.server.credentials.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "the-wrong-secret")
    code, out, _ = _run("probe", "--store", bucket.store_url, "--endpoint-url", bucket.server.url)
    assert code == EXIT_PROBE
    assert "FAIL bucket" in out
    assert "the-wrong-secret" not in out


def test_prune_prints_what_it_removed(root: str, tmp_path: Path) -> None:
    for step in ("1", "2", "3"):
        _run(
            "save",
            str(_save_folder(tmp_path, step, step.encode())),
            "--step",
            step,
            "--store",
            root,
            "--epoch",
            "1000000",
        )
    code, out, _ = _run("prune", "--keep", "1", "--store", root, "--epoch", "1000000")
    assert code == 0
    assert out.splitlines() == [
        "pruned 000001000000-000000000000002",
        "pruned 000001000000-000000000000001",
    ]


def test_debug_output_never_contains_the_secret_key(s3_env: Bucket, tmp_path: Path) -> None:
    import subprocess
    import sys

    env = {
        **os.environ,
        "PUBLISH_STORE": s3_env.store_url,
        "PUBLISH_ENDPOINT_URL": s3_env.server.url,
        "DISPATCH_EPOCH": "1000000",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from publish.cli import main; main()",
            "-vv",
            "save",
            str(_save_folder(tmp_path)),
            "--step",
            "1",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "published" in done.stderr  # the debug/info lines were really on
    assert s3_env.server.credentials.secret_access_key not in done.stdout + done.stderr


# Issue 12, finding 5: one line, a documented exit code, never a traceback.


def _one_line(err: str, *words: str) -> None:
    assert len(err.splitlines()) == 1, err
    assert err.startswith("publish: "), err
    assert len(err) < 400, err
    assert "Traceback" not in err
    for word in words:
        assert word in err, err


@pytest.mark.parametrize("where", ["--epoch", "DISPATCH_EPOCH", "--step"])
def test_a_number_of_thousands_of_digits_exits_5_in_one_line(
    root: str, tmp_path: Path, where: str
) -> None:
    huge = "7" * 5000
    epoch, step, env = "1000000", "1", {}
    if where == "--epoch":
        epoch = huge
    elif where == "--step":
        step = huge
    else:
        env = {"DISPATCH_EPOCH": huge}
    args = ["save", str(_save_folder(tmp_path)), "--step", step, "--store", root]
    code, _, err = _run(*args, *([] if env else ["--epoch", epoch]), env=env)
    assert code == EXIT_INVALID
    _one_line(err, "step" if where == "--step" else "epoch", "5000 characters")
    assert not Path(root).exists()


@pytest.mark.parametrize("argument", ["FOLDER", "--store", "--into", "--config", "--epoch"])
def test_a_nul_byte_in_an_argument_exits_5_in_one_line(
    root: str, tmp_path: Path, argument: str
) -> None:
    """CliRunner hands the arguments over as they are (a real argv cannot hold NUL)."""
    nul = str(tmp_path / "a\0b")
    values = {
        "FOLDER": str(_save_folder(tmp_path)),
        "--store": root,
        "--into": None,
        "--config": None,
        "--epoch": "1000000",
    }
    values[argument] = nul
    if argument in ("FOLDER", "--into"):
        verb = ["resolve", "--into", nul] if argument == "--into" else ["save", nul, "--step", "1"]
    else:
        verb = ["save", values["FOLDER"] or "", "--step", "1"]
    options = [
        item
        for name in ("--store", "--config", "--epoch")
        if values[name] is not None
        for item in (name, values[name] or "")
    ]
    code, _, err = _run(*verb, *options)
    assert code == EXIT_INVALID
    _one_line(err, "NUL")


def _config_with_credentials_path(tmp_path: Path, credentials: str) -> Path:
    config = tmp_path / "publish.toml"
    config.write_text(f'[[credentials]]\nsource = "file"\npath = {json.dumps(credentials)}\n')
    return config


@pytest.mark.parametrize("case", ["folder", "not utf-8", "nul byte"])
def test_a_credentials_file_that_is_a_folder_or_not_utf8_exits_6_in_one_line(
    bucket: Bucket, tmp_path: Path, case: str
) -> None:
    credentials = tmp_path / "credentials"
    if case == "folder":
        credentials.mkdir(mode=0o700)
    elif case == "not utf-8":
        credentials.write_bytes(b"access_key_id = \xff\xfe\nsecret_access_key = x\n")
        credentials.chmod(0o600)
    config = _config_with_credentials_path(
        tmp_path, str(credentials) + ("\0" if case == "nul byte" else "")
    )
    code, _, err = _run(
        "resolve",
        "--store",
        bucket.store_url,
        "--endpoint-url",
        bucket.server.url,
        "--epoch",
        "1",
        "--config",
        str(config),
    )
    assert code == (EXIT_INVALID if case == "nul byte" else EXIT_UNAVAILABLE)
    _one_line(err, {"folder": "is a folder", "not utf-8": "UTF-8", "nul byte": "NUL"}[case])


def test_a_config_file_or_path_that_is_not_utf8_exits_5_in_one_line(tmp_path: Path) -> None:
    """A real process: the config path's bytes are not UTF-8, nor is the file's content."""
    import subprocess
    import sys

    config = os.path.join(os.fsencode(tmp_path), b"conf-\xff.toml")
    with open(config, "wb") as handle:
        handle.write(b'region = "\xff"\n')
    done = subprocess.run(
        [
            os.fsencode(sys.executable),
            b"-c",
            b"from publish.cli import main; main()",
            b"resolve",
            b"--store",
            os.fsencode(tmp_path / "root"),
            b"--epoch",
            b"1",
            b"--config",
            config,
        ],
        capture_output=True,
    )
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == EXIT_INVALID, err
    _one_line(err, "UTF-8", "conf-")


def test_no_space_left_on_a_folder_store_exits_6_in_one_line(
    tmp_path: Path, tiny_filesystem: TinyFilesystem
) -> None:
    """A real, nearly full tmpfs as the checkpoint root, with less room left each time, so the
    save runs out of space at each of its writes in turn (data, manifest, log entry)."""
    folder = _save_folder(tmp_path, content=os.urandom(5000))
    outcomes = set()
    for pages in range(8):
        mounted = tiny_filesystem(64 * 1024)
        fill(mounted, leave=pages * 4096)
        root = mounted / "root"
        code, _, err = _run(
            "save", str(folder), "--step", "1", "--store", str(root), "--epoch", "1000000"
        )
        outcomes.add(code)
        if code == 0:
            continue
        assert code == EXIT_UNAVAILABLE
        _one_line(err, "No space left", "free space")
        # A failed save leaves nothing of itself behind to fill the disk further.
        assert [p for p in root.rglob("*") if p.is_file()] == [], err
    assert outcomes == {0, EXIT_UNAVAILABLE}


def test_no_space_left_for_resolve_into_exits_1_in_one_line(
    root: str, tmp_path: Path, tiny_filesystem: TinyFilesystem
) -> None:
    _run(
        "save",
        str(_save_folder(tmp_path, content=os.urandom(20_000))),
        "--step",
        "1",
        "--store",
        root,
        "--epoch",
        "1000000",
    )
    mounted = tiny_filesystem(64 * 1024)
    fill(mounted, leave=4096)
    code, _, err = _run(
        "resolve", "--into", str(mounted / "resume"), "--store", root, "--epoch", "1000000"
    )
    assert code == 1
    _one_line(err, "No space left", "free space")
    assert sorted(p.name for p in mounted.iterdir()) == ["filler"]


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:99999", "http://127.0.0.1:port"])
def test_an_endpoint_url_with_a_bad_port_exits_5_in_one_line(s3_env: Bucket, endpoint: str) -> None:
    code, _, err = _run(
        "resolve", "--store", s3_env.store_url, "--endpoint-url", endpoint, "--epoch", "1"
    )
    assert code == EXIT_INVALID
    _one_line(err, "port")


@pytest.mark.parametrize("interval", ["nan", "-1", "0", "inf", "1e308"])
def test_a_watch_interval_that_is_not_a_sensible_number_exits_5_in_one_line(
    root: str, tmp_path: Path, interval: str
) -> None:
    # --once, so that the old behaviour (a watch that never wakes, or ignores TERM) fails the
    # test instead of hanging it; the interval is checked before anything runs either way.
    code, _, err = _run(
        "watch", str(tmp_path), "--once", "--interval", interval, "--store", root, "--epoch", "1"
    )
    assert code == EXIT_INVALID
    _one_line(err, "--interval")
