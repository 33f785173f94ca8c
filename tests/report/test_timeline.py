"""The timeline picture: the tutorial's job against its golden text, the SVG of the same
rows, and ``dispatch status --timeline`` / ``--svg``."""

from __future__ import annotations

import json
import os
import pwd
import sys
from datetime import timedelta
from pathlib import Path
from xml.etree import ElementTree

import pytest
from report_records import PUBLICATIONS, Rec, at, preempted_node_lost_then_succeeded
from report_tutorial import tutorial_job

from dispatch.core.fold import fold
from dispatch.model.enums import CauseKind
from dispatch.report import figures, spans
from dispatch.report.svg import BARS, COLOURS, MARK, POINTS, svg
from dispatch.report.timeline import WIDTH, draw

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_setup import ADA, Site  # noqa: E402

import dispatch  # noqa: E402

GOLDEN = Path(__file__).with_name("tutorial.timeline")
SVG = "{http://www.w3.org/2000/svg}"


def test_the_tutorials_timeline_is_its_golden_text() -> None:
    view, publications, now = tutorial_job()
    text = draw(
        view.header.job, view.header.spec.name, spans(view, fold(view, now)), publications, now
    )
    assert text == GOLDEN.read_text()


def test_the_tutorials_timeline_is_plain_ascii_that_fits_a_log_line() -> None:
    text = GOLDEN.read_text()
    assert text.isascii() and "\x1b" not in text and "\t" not in text
    picture = text.split("\n\n", 1)[0].splitlines()
    assert all(len(line) <= 14 + WIDTH + 16 for line in picture[1:])


def test_the_tutorials_figures_agree_with_its_timeline() -> None:
    view, publications, now = tutorial_job()
    f = figures(spans(view, fold(view, now)), publications, now)
    # Preempted 12 minutes after it was seen running; its last checkpoint was 4 minutes
    # before the sweep that saw the preemption.
    assert {x.cause: x.seconds for x in f.losses} == {"preempted": 4 * 60}
    assert sum(f.parts.values()) == f.wall == 30 * 60


def test_the_svg_draws_every_row_with_a_title_on_every_mark() -> None:
    s = preempted_node_lost_then_succeeded().spans()
    doc = ElementTree.fromstring(svg("job1", "fine<tune>", s, PUBLICATIONS, at(10_000)))
    assert doc.tag == f"{SVG}svg"
    rows = [g for g in doc.iter(f"{SVG}g") if g.get("class") == "row"]
    labels = [g.get("data-label") for g in rows]
    assert labels == ["1 101", "2 102", "3 103", "holds", "checkpoints", "record"]
    marks = [*doc.iter(f"{SVG}rect"), *doc.iter(f"{SVG}g")]
    assert all(m.find(f"{SVG}title") is not None for m in marks if m.get("class") in BOTH)
    assert "fine<tune>" in (doc.findtext(f"{SVG}title") or "")
    titles = [g.findtext(f"{SVG}title") or "" for row in rows for g in row.iter(f"{SVG}g")]
    assert sum(1 for t in titles if t.startswith("checkpoint at ")) == len(PUBLICATIONS)


BOTH = ("bar", "point")


def test_the_svg_has_a_legend_of_every_colour_and_mark() -> None:
    s = preempted_node_lost_then_succeeded().spans()
    doc = ElementTree.fromstring(svg("job1", "finetune", s, PUBLICATIONS, at(10_000)))
    [legend] = [g for g in doc.iter(f"{SVG}g") if g.get("class") == "legend"]
    said = [t.text for t in legend.iter(f"{SVG}text")]
    assert said == [*BARS.values(), *(meaning for _, meaning in POINTS.values())]
    swatches = {r.get("fill") for r in legend.iter(f"{SVG}rect") if r.get("width") == "18"}
    assert swatches == set(COLOURS.values())
    assert [g.get("data-mark") for g in legend.findall(f"{SVG}g")] == list(POINTS)


def test_marks_at_one_instant_stand_apart_and_keep_their_order() -> None:
    # Outcome and settle one second apart, over half an hour: one pixel apart on the axis.
    rec = preempted_node_lost_then_succeeded()
    doc = ElementTree.fromstring(svg("job1", "finetune", rec.spans(), [], at(1800)))
    [record] = [g for g in doc.iter(f"{SVG}g") if g.get("data-label") == "record"]
    xs = [float(g.get("data-x") or 0) for g in record.findall(f"{SVG}g")]
    marks = [g.get("data-mark") for g in record.findall(f"{SVG}g")]
    assert marks == ["a", "a", "a", "o", "s"]
    assert all(b - a >= 2 * MARK for a, b in zip(xs, xs[1:], strict=False)), xs


def _status(site: Site, *args: str) -> tuple[int, str, str]:
    result = site.run(["status", *args, "--config", str(site.config)], env={"USER": "ada"})
    return result.exit_code, result.stdout, result.stderr


def test_status_timeline_draws_the_job_and_svg_writes_it(tmp_path: Path) -> None:
    site = Site(tmp_path)
    rule = dispatch.Rule(on=["preempted"], action="resubmit", budget=2)
    spec = site.spec.model_copy(update={"recovery": dispatch.RecoveryPolicy(rules=(rule,))})
    job = site.cluster.operator.submit(spec, ADA, supervised=True).job
    for _ in range(3):
        site.sweep()
    first = site.cluster.observer.get(job).submissions[0].canonical
    assert first is not None
    site.backend.env().preempt(first)
    for _ in range(3):
        site.sweep()
    picture = tmp_path / "job.svg"
    code, out, err = _status(site, job, "--timeline", "--svg", str(picture))
    assert (code, err) == (0, "")
    assert out.startswith(f"timeline of job {job} (finetune): ")
    assert "preempted" in out and f"ended {first.id}: preempted" in out
    ElementTree.parse(picture)
    code, out, _ = _status(site, job, "--svg", str(tmp_path / "only.svg"))
    assert (code, out) == (0, "") and (tmp_path / "only.svg").is_file()


def test_status_timeline_with_json_is_refused(tmp_path: Path) -> None:
    site = Site(tmp_path)
    (job,) = site.submit()
    code, out, err = _status(site, job, "--timeline", "--json")
    assert code == 2 and out == "" and err.startswith("error: ")


@pytest.mark.parametrize("minutes", [1, 90, 60 * 30])
def test_the_axis_is_labelled_at_any_length(minutes: int) -> None:
    s = preempted_node_lost_then_succeeded().spans()
    text = draw("job1", "finetune", s, [], s.submitted + timedelta(minutes=minutes))
    assert text.splitlines()[1].strip().startswith("12:00:00")
    assert json.dumps(text)  # plain text through any JSON log shipper


def test_rows_follow_time_even_when_a_launch_ended_before_it_ran() -> None:
    rec = (
        Rec()
        .launch(10, 1, 101)
        .ended(30, 101, 1, CauseKind.LAUNCH_FAILED)
        .launch(36, 2, 102, rule=0)
        .running(50, 102, 2, nodes=("n1", "n2"))
        .ended(90, 102, 2, CauseKind.PREEMPTED)
        .launch(96, 3, 103, rule=0)
        .ended(100, 103, 3, CauseKind.LAUNCH_FAILED)
    )
    s = rec.spans()
    text = draw("job1", "finetune", s, [], at(120))
    labels = [line.split()[:2] for line in text.splitlines()[3:6]]
    assert labels == [["1", "101"], ["2", "102"], ["3", "103"]]


def test_svg_follows_no_link_and_never_writes_a_file_of_another_user(tmp_path: Path) -> None:
    """``--svg`` writes as ``--metrics`` does: a link planted in a shared folder (mode 777) is
    refused, not followed, whether it leads to a victim's file or nowhere; another user's file
    in a sticky folder is refused, not written into; a link of one's own is replaced."""
    other = pwd.getpwnam("nobody")
    site = Site(tmp_path)
    (job,) = site.submit()
    shared = tmp_path / "team"
    shared.mkdir()
    shared.chmod(0o777)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    planted = shared / "job.svg"
    planted.symlink_to(victim)
    dangling = shared / "dangling.svg"
    dangling.symlink_to(tmp_path / "created-elsewhere")
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    theirs = sticky / "theirs.svg"
    theirs.write_text("theirs\n")
    theirs.chmod(0o666)
    for path in (planted, dangling, theirs):
        os.lchown(path, other.pw_uid, other.pw_gid)
    for target in (planted, dangling, theirs):
        code, out, err = _status(site, job, "--svg", str(target))
        assert (code, out) == (1, ""), err
        assert err.startswith("error: dispatch: rejected: --svg file ") and "another user" in err
        assert err.count("\n") == 1
    assert victim.read_text() == "precious\n" and theirs.read_text() == "theirs\n"
    assert not (tmp_path / "created-elsewhere").exists()
    assert sorted(p.name for p in shared.iterdir()) == ["dangling.svg", "job.svg"]
    mine = shared / "mine.svg"
    mine.symlink_to(victim)
    assert _status(site, job, "--svg", str(mine))[0] == 0
    assert not mine.is_symlink() and victim.read_text() == "precious\n"
    ElementTree.parse(mine)
    assert oct(mine.stat().st_mode & 0o777) == oct(0o644)


def test_an_svg_of_a_name_with_control_characters_is_well_formed_and_shows_them_escaped(
    tmp_path: Path,
) -> None:
    site = Site(tmp_path)
    spec = site.spec.model_copy(update={"name": "fine\x01tune\u202e\x1b"})
    job = site.cluster.operator.submit(spec, ADA, supervised=True).job
    picture = tmp_path / "job.svg"
    code, _, err = _status(site, job, "--svg", str(picture))
    assert code == 0, err
    doc = ElementTree.parse(picture).getroot()
    assert "fine\\x01tune\\u202e\\x1b" in (doc.findtext(f"{SVG}title") or "")
    assert "\u202e" not in picture.read_text()
