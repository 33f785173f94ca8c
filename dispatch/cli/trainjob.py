"""``dispatch trainjob``: submit your own Kubeflow TrainJob manifest under dispatch.

    dispatch trainjob [DISPATCH OPTIONS] MANIFEST

MANIFEST is a YAML (or JSON) file holding one ``TrainJob``, or ``-`` for stdin. How dispatch
recovers the job is said by the same options as ``dispatch sbatch``'s ``#DISPATCH`` lines,
given as flags or in the manifest's annotation ``dispatch.dev/options`` (a flag wins). Every
submission creates the manifest as written, with dispatch's gate, labels, annotations and
``DISPATCH_*`` variables added (``docs/kubeflow.md``). The command prints the plan, records
the job, launches it and prints its ids; ``--plan`` prints the plan, lets the API server check
the TrainJob with a dry run, and creates nothing. Exit codes: 0 submitted, 1 refused, 2 bad
input (nothing recorded).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from dispatch.batch.dispatch_lines import (
    OPTIONS,
    JobOptions,
    Reader,
    directive_words,
    is_option,
    submit_keywords,
)
from dispatch.cli.render import clean
from dispatch.cli.sbatch import CHECK_JOB, _launched, _plan, _submitted, _summary, plan_lines
from dispatch.cli.session import Session, echo_json, fail, me, refusals
from dispatch.cluster import Config, compose
from dispatch.model.enums import CheckpointMode, State
from dispatch.model.errors import DispatchError, InvalidError, UnreachableError
from dispatch.model.limits import MAX_SCRIPT
from dispatch.model.objects import StartRequest
from dispatch.model.values import (
    Extension,
    JobSpec,
    Plan,
    RecoveryPolicy,
    SharedCheckpoint,
    TrainJobManifest,
)
from dispatch.regular_file import read_regular
from dispatch.spi import Backend, StartChecker

# The annotation a manifest says dispatch's options in, as a #DISPATCH line holds them.
OPTIONS_ANNOTATION = "dispatch.dev/options"
# The TrainJob API the kubeflow adapter speaks.
API_VERSION = "trainer.kubeflow.org/v1alpha1"

_HELP = f"""Submit your own Kubeflow TrainJob manifest under dispatch.

\b
    dispatch trainjob [DISPATCH OPTIONS] MANIFEST

MANIFEST is a YAML or JSON file holding one TrainJob, or - to read it from stdin. Recovery
is said by dispatch's options, as flags or in the manifest's annotation
{OPTIONS_ANNOTATION} (a flag wins). Each submission creates your manifest as written, under
a name of dispatch's, with dispatch's admission gate, labels and DISPATCH_* variables
added; the config's backend must be the kubeflow adapter.

\b
Dispatch options (flags, or words of the {OPTIONS_ANNOTATION} annotation):
{chr(10).join(f"  {row[0]:<38} {row[1]}" for row in (o.row() for o in OPTIONS))}

\b
Options of dispatch trainjob itself:
  --config FILE   the config file (default: $DISPATCH_CONFIG, ~/.dispatch/config.toml)
  --plan          print the plan, let the API server check the TrainJob, create nothing
  --json          print the plan and the job's ids as JSON
  --parsable      print only the dispatch job id

\b
Example:
  metadata:
    name: finetune
    annotations:
      {OPTIONS_ANNOTATION}: --rule=preempted,node-lost:resubmit:3

\b
  $ dispatch trainjob finetune.yaml

See docs/kubeflow.md for the whole story.
"""


@dataclass(frozen=True)
class TrainJobCommand:
    """The words of ``dispatch trainjob``, sorted into its own options, dispatch's options and
    the manifest."""

    manifest: str | None = None
    job: tuple[str, ...] = ()
    config: str | None = None
    plan: bool = False
    json: bool = False
    parsable: bool = False
    help: bool = False


_FLAGS = {"--plan": "plan", "--json": "json", "--parsable": "parsable", "--help": "help"}


def split(words: Sequence[str]) -> TrainJobCommand:
    """Sort the command line; an unknown option or a second manifest is refused."""
    got: dict[str, Any] = {}
    job: list[str] = []
    manifest: str | None = None
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word in _FLAGS:
            got[_FLAGS[word]] = True
        elif word == "--config" or word.startswith("--config="):
            got["config"], i = _config(word, words, i)
        elif is_option(word):
            used = Reader("the command line").split(word, words[i : i + 1])[2]
            job.extend(words[i - 1 : i - 1 + used])
            i += used - 1
        elif word.startswith("-") and word != "-":
            raise InvalidError(
                f"{word}: not an option of dispatch trainjob (see dispatch trainjob --help)"
            )
        elif manifest is not None:
            raise InvalidError(f"{word}: one manifest per submission ({manifest} is already named)")
        else:
            manifest = word
    return TrainJobCommand(manifest=manifest, job=tuple(job), **got)


def _config(word: str, words: Sequence[str], i: int) -> tuple[str, int]:
    """``--config``'s value, from the word or the next one, and where the words go on."""
    if "=" in word:
        return word.partition("=")[2], i
    if i >= len(words):
        raise InvalidError("--config needs a value: --config=FILE")
    return words[i], i + 1


def read_manifest(name: str | None) -> tuple[str, str]:
    """The manifest's text and where it came from (``stdin`` for ``-``)."""
    if name is None:
        raise InvalidError(
            "give the TrainJob manifest to submit: dispatch trainjob [OPTIONS] MANIFEST "
            "(- reads it from stdin)"
        )
    if name == "-":
        text = sys.stdin.read(MAX_SCRIPT + 1)
        if len(text) > MAX_SCRIPT:
            raise InvalidError(f"the manifest on stdin is more than the {MAX_SCRIPT} allowed")
        return text, "stdin"
    try:
        data, _ = read_regular(Path(name), "manifest", MAX_SCRIPT)
    except FileNotFoundError:
        raise InvalidError(f"manifest {name}: no such file") from None
    except OSError as err:
        raise InvalidError(f"manifest {name} cannot be read: {err.strerror}") from None
    try:
        return data.decode("utf-8"), name
    except UnicodeDecodeError:
        raise InvalidError(f"manifest {name} is not UTF-8 text") from None


def parse_manifest(text: str, source: str) -> dict[str, Any]:
    """The one TrainJob ``text`` holds, as JSON values; anything else refused naming why."""
    import yaml  # only this command reads YAML

    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        at = f" (line {where.line + 1})" if where is not None else ""
        said = " ".join(str(getattr(err, "problem", None) or err).split())
        raise InvalidError(f"manifest {source}{at}: not YAML: {said}") from None
    if len(documents) != 1:
        raise InvalidError(
            f"manifest {source}: holds {len(documents)} documents; give one TrainJob per submission"
        )
    (body,) = documents
    if not isinstance(body, dict):
        raise InvalidError(f"manifest {source}: expected a TrainJob, not {type(body).__name__}")
    if body.get("kind") != "TrainJob" or body.get("apiVersion") != API_VERSION:
        raise InvalidError(
            f"manifest {source}: kind {body.get('kind')!r}, apiVersion "
            f"{body.get('apiVersion')!r}: dispatch trainjob submits a TrainJob of "
            f"{API_VERSION}"
        )
    try:
        json.dumps(body)
    except (TypeError, ValueError):
        raise InvalidError(
            f"manifest {source}: holds values JSON has none of (a date, say); quote them"
        ) from None
    if not isinstance(body.get("metadata") or {}, dict):
        raise InvalidError(f"manifest {source}: metadata: expected a mapping")
    if not isinstance(body.get("spec"), dict):
        raise InvalidError(f"manifest {source}: spec: a TrainJob has a spec (a mapping)")
    return body


def manifest_options(body: Mapping[str, Any], source: str) -> JobOptions:
    """The options of the manifest's ``dispatch.dev/options`` annotation."""
    notes = (body.get("metadata") or {}).get("annotations") or {}
    said = notes.get(OPTIONS_ANNOTATION) if isinstance(notes, Mapping) else None
    if said is None:
        return JobOptions()
    where = f"manifest {source}, annotation {OPTIONS_ANNOTATION}"
    if not isinstance(said, str):
        raise InvalidError(f"{where}: expected text such as --rule=preempted:resubmit:3")
    try:
        words = directive_words(" " * len("#DISPATCH") + said)
    except ValueError as err:
        raise InvalidError(f"{where}: {err}") from None
    return Reader(where).take(words)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def _trainer_words(body: Mapping[str, Any], source: str) -> tuple[dict[str, Any], list[str]]:
    """The manifest's trainer, and its command and arguments as one list of words."""
    trainer = body["spec"].get("trainer") or {}
    if not isinstance(trainer, dict):
        raise InvalidError(f"manifest {source}: spec.trainer: expected a mapping")
    words = [*(trainer.get("command") or ()), *(trainer.get("args") or ())]
    if not all(isinstance(w, str) for w in words):
        raise InvalidError(f"manifest {source}: spec.trainer.command and args: expected text")
    return trainer, words


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def job_spec(body: dict[str, Any], source: str, options: JobOptions) -> JobSpec:
    """The job dispatch records for the manifest: its name, shape and recovery; the manifest
    itself travels as the spec's extension."""
    trainer, words = _trainer_words(body, source)
    runtime = _text((body["spec"].get("runtimeRef") or {}).get("name")) or "runtime"
    extensions: list[Extension] = [
        TrainJobManifest(source=source, manifest=json.dumps(body, separators=(",", ":")))
    ]
    if options.checkpoint is CheckpointMode.SHARED:
        extensions.append(SharedCheckpoint())
    named = options.name or _text((body.get("metadata") or {}).get("name"))
    return JobSpec(
        name=named or Path(source).stem or "trainjob",
        command=tuple(words) or (f"{runtime}:default",),
        nodes=_count(trainer.get("numNodes")),
        procs_per_node=_count(trainer.get("numProcPerNode")),
        image=_text(trainer.get("image")),
        recovery=RecoveryPolicy(rules=options.rules or ()),
        extensions=tuple(extensions),
    )


def _kubeflow(session: Session) -> Backend:
    """The configured backend, which must be the kubeflow adapter."""
    name = session.settings.backend
    if name != "kubeflow":
        raise InvalidError(
            f"{session.settings.source}: backend.name is {name!r}; dispatch trainjob creates "
            "TrainJobs through the kubeflow adapter (docs/kubeflow.md, Settings)"
        )
    return session.backend


def _check(backend: Backend, spec: JobSpec) -> str:
    """The API server's dry run of the TrainJob; its refusal raised as bad input."""
    if not isinstance(backend, StartChecker):
        return ""
    req = StartRequest(job=CHECK_JOB, submission=1, attempt=1, lineage_submission=1, spec=spec)
    try:
        return backend.check(req)
    except UnreachableError as err:
        click.echo(
            f"note: the API server could not check the TrainJob now ({err.message}); it is "
            "checked when the job launches",
            err=True,
        )
        return ""
    except DispatchError as err:
        raise InvalidError(
            f"the TrainJob is refused as it stands: {err.message}; nothing was recorded"
        ) from None


@click.command(
    name="trainjob",
    help=_HELP,
    add_help_option=False,
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.argument("words", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def trainjob(ctx: click.Context, words: tuple[str, ...]) -> None:
    with refusals():
        cmd = split(words)
        if cmd.help:
            click.echo(ctx.get_help())
            return
        text, source = read_manifest(cmd.manifest)
        body = parse_manifest(text, source)
        options = manifest_options(body, source)
        if cmd.job:
            options = Reader("the command line").take(cmd.job).over(options)
        spec = job_spec(body, source, options)
        submit = submit_keywords(options, len(spec.recovery.rules))
        session = Session(cmd.config)
        backend = _kubeflow(session)
        plan = _plan(backend, spec, submit)
        said = _check(backend, spec)
        if cmd.plan:
            _print_plan(cmd, plan, said)
            return
        cluster = compose(backend, Config(store=session.store))
        plan = cluster.operator.submit(spec, me(), **submit)
        launched = session.supervisor().launch(plan.job)
        st = _launched(session, plan.job, launched)
    failed = st.state is State.FAILED
    if cmd.parsable:
        if not failed:
            click.echo(plan.job)
    elif cmd.json:
        got = _submitted(st)
        got["object"] = got.pop("slurm_job")
        echo_json({**got, "plan": plan.model_dump(mode="json")})
    else:
        for line in plan_lines(plan):
            click.echo(clean(line))
        if not failed:
            click.echo(clean(_summary(st, "kubeflow")))
    if failed:
        fail(f"dispatch job {st.job} failed at launch: {st.cause.kind}: {st.cause.detail}", 1)


def _print_plan(cmd: TrainJobCommand, plan: Plan, said: str) -> None:
    if cmd.json:
        echo_json({"plan": plan.model_dump(mode="json"), "kubernetes": said})
        return
    for line in plan_lines(plan):
        click.echo(clean(line))
    if said:
        click.echo(f"Kubernetes would take it: {said}")
    click.echo("nothing was created (--plan)")
