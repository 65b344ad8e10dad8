"""``make gradescope-docker``: the Gradescope bundle, run the way Gradescope runs it.

Gradescope runs an autograder inside an ordinary Docker container with Docker's default
security: the default seccomp profile, no ``CAP_SYS_ADMIN``, masked ``/proc`` paths, a
read-only ``/proc/sys``; no namespace of any kind can be made there. This command builds such a
container from nothing but Debian's packages and runs the bundle in it end to end:

1. an image made by ``debootstrap`` (Debian bookworm, ``minbase``) and ``docker import``
   (``--rootfs`` keeps the tree between runs), so no registry is needed;
2. ``make gradescope``'s zip unpacked to ``/autograder/source``, ``setup.sh`` run as root, then
   ``run_autograder`` on three submission folders as Gradescope hands them over: the reference
   solution, the bare handout, and a hostile submission (it tries to send the hidden inputs
   out through exception messages, printed text and the network, to read the expected values,
   to borrow a blocked package and to hold memory the watchdog cannot see);
3. checks: the reference scores full marks, the bare handout and the hostile submission 0, the
   isolation level is named in every ``results.json``, and no byte of a hidden input reaches
   one. Prints the level and the scores; exit status 1 if a check fails;
4. the course settings (``course/grading``) with a ``submission_metadata.json`` written here
   beside each submission, as Gradescope does: the reference on time (full marks, Gradescope's
   visibility fields, leaderboard entries), late (the rubric's late penalty) and over the rate
   limit (graded in full, every test held back, the time full feedback returns).

Needs root, ``docker.io`` with its daemon running, and ``debootstrap`` (Debian/Ubuntu:
``apt-get install docker.io debootstrap``; ``dockerd &`` where no service manager runs). The
host's uv cache is mounted into the container so ``uv sync`` does not download torch again,
the host's Python is lent to ``setup.sh`` where it is the grader's minor version (the container
cannot download one, as Gradescope's setup does; Debian bookworm's own is 3.11), and a host whose network needs its own certificate authorities (``SSL_CERT_FILE``) lends the
container that bundle.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from course.grading.gradescope import build
from course.grading.settings import load_settings
from course.paths import HIDDEN, REPO_ROOT, RUBRIC
from course.project import grader_python

IMAGE = "cs336-gradescope-base:bookworm"
ROOTFS = Path("/var/tmp/cs336-rootfs")
MIRROR = "http://deb.debian.org/debian"
PROGRAMS = Path(__file__).with_name("programs")
# Inside the container: Gradescope's layout, setup once, then each submission in turn.
RUN_SH = PROGRAMS / "docker_run.sh"
# The hostile submission's adapters: every way out it can think of, then nothing implemented.
HOSTILE = PROGRAMS / "hostile_adapters.py"


def run(command: list[str], **options) -> subprocess.CompletedProcess:
    return subprocess.run(command, check=True, text=True, **options)


def ensure_image(rootfs: Path) -> None:
    """The base image: imported from a debootstrap tree, made once."""
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode == 0:
        return
    if not (rootfs / "usr" / "bin").is_dir():
        print(f"debootstrap into {rootfs} (a few minutes, once)", flush=True)
        run(["debootstrap", "--variant=minbase", "bookworm", str(rootfs), MIRROR])
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    run(["docker", "import", "-", IMAGE], stdin=tar.stdout, capture_output=True)
    tar.wait()


def submissions(work: Path) -> dict[str, Path]:
    """The three submission folders, as Gradescope unpacks an upload."""
    folders = {}
    run([sys.executable, "-m", "course.handout.build", "--out", str(work / "dist")], cwd=REPO_ROOT)
    roots = {"reference": REPO_ROOT, "bare": work / "dist" / "handout"}
    for name, root in [*roots.items(), ("hostile", roots["bare"])]:
        zip_path = work / f"{name}.zip"
        run(
            [
                sys.executable,
                "-m",
                "course.handout.submission",
                "--root",
                str(root),
                "--out",
                str(zip_path),
            ]
        )
        folder = work / "in" / "submissions" / name
        with zipfile.ZipFile(zip_path) as archive:
            archive.extractall(folder)
        if name == "hostile":
            with open(folder / "tests" / "adapters.py", "a") as stream:
                stream.write("\n" + HOSTILE.read_text(encoding="utf-8"))
        folders[name] = folder
    return folders


DUE = datetime(2026, 4, 10, 23, 59, tzinfo=timezone(timedelta(hours=-7)))
LATE_BY = timedelta(hours=30)


def metadata(created: datetime, earlier: int) -> dict:
    """A submission_metadata.json as Gradescope documents it; ``earlier`` submissions in the
    last hours, each with full feedback."""
    previous = [
        {
            "submission_time": (created - timedelta(minutes=30 * (i + 1))).isoformat(),
            "score": 0.0,
            "results": {"extra_data": {"policy": {"full_feedback": True}}},
        }
        for i in range(earlier)
    ]
    return {
        "id": 1000 + earlier,
        "created_at": created.isoformat(),
        "assignment": {
            "due_date": DUE.isoformat(),
            "late_due_date": (DUE + timedelta(days=3)).isoformat(),
            "title": "cs336 basics",
            "total_points": "64.0",
        },
        "users": [{"email": "student@example.edu", "id": 1, "name": "Student"}],
        "previous_submissions": previous,
    }


def policy_submissions(work: Path, reference: Path) -> None:
    """The reference again, late and over the rate limit, each with its metadata; the
    reference itself on time."""
    settings = load_settings(RUBRIC)
    limit = settings.policy.rate_limit.submissions if settings.policy.rate_limit else 0
    cases = {
        "reference": metadata(DUE - timedelta(days=1), 0),
        "reference-late": metadata(DUE + LATE_BY, 0),
        "reference-over-limit": metadata(DUE - timedelta(hours=2), limit),
    }
    (work / "in" / "metadata").mkdir(parents=True, exist_ok=True)
    for name, data in cases.items():
        if name != "reference":
            shutil.copytree(reference, work / "in" / "submissions" / name)
        (work / "in" / "metadata" / f"{name}.json").write_text(json.dumps(data, indent=1))


def policy_problems(out: Path, full: float) -> list[str]:
    """What the course settings got wrong in the policy submissions' results."""
    settings = load_settings(RUBRIC)
    problems = []
    reports = {}
    for name in ("reference", "reference-late", "reference-over-limit"):
        path = out / f"{name}.json"
        if not path.is_file():
            return [f"{name}: no results.json"]
        reports[name] = json.loads(path.read_text())
        for key in ("visibility", "stdout_visibility"):
            if key not in reports[name]:
                problems.append(f"{name}: no {key}")
    on_time, late, limited = reports.values()
    if settings.leaderboard.measured and not on_time.get("leaderboard"):
        problems.append("reference: no leaderboard entries")
    if settings.policy.late:
        hours = LATE_BY.total_seconds() / 3600
        units = math.ceil(hours / (24 if settings.policy.late.per == "day" else 1))
        wanted = round(full * max(0.0, 1 - units * settings.policy.late.penalty), 4)
        print(f"reference-late: {late['score']:g} / {full:g} (late policy: {wanted:g})")
        if late["score"] != wanted:
            problems.append(f"reference-late: scored {late['score']}, expected {wanted}")
    if settings.policy.rate_limit:
        shown = {t["visibility"] for t in limited["tests"]}
        print(f"reference-over-limit: {limited['score']:g}, tests shown: {sorted(shown)}")
        if limited["score"] != full or "visible" in shown:
            problems.append(f"reference-over-limit: score {limited['score']}, shown {shown}")
        if "Full feedback returns at" not in limited["output"]:
            problems.append("reference-over-limit: the output does not say when feedback returns")
    return problems


def hidden_fingerprints() -> list[str]:
    """What the hostile submission would send out of each hidden input: its first bytes."""
    inputs = HIDDEN / "inputs"
    return [p.read_bytes()[:64].hex() for p in inputs.rglob("*-hidden-*") if p.stat().st_size > 24]


def check(out: Path, full: float) -> list[str]:
    """What went wrong, judged from the results the container wrote."""
    problems = []
    wanted = {"reference": full, "bare": 0.0, "hostile": 0.0}
    prints = hidden_fingerprints()
    for name, score in wanted.items():
        path = out / f"{name}.json"
        if not path.is_file():
            problems.append(f"{name}: no results.json (see {out / (name + '.log')})")
            continue
        text = path.read_text()
        report = json.loads(text)
        print(f"{name}: {report['score']:g} / {full:g}")
        if report["score"] != score:
            problems.append(f"{name}: scored {report['score']}, expected {score}")
        if "isolation" not in report.get("extra_data", {}):
            problems.append(f"{name}: results.json does not name the isolation level")
        if any(p in text for p in prints):
            problems.append(f"{name}: a hidden input reached results.json")
        if "GOT-" in text:
            problems.append(f"{name}: an attack got through: {text[text.index('GOT-') :][:80]}")
    return problems


def certificate_options() -> list[str]:
    """The host's certificate bundle for the container's downloads, where the host names one."""
    bundle = os.environ.get("SSL_CERT_FILE", "")
    if not Path(bundle).is_file():
        return []
    inside = "/etc/cs336-host-ca.crt"
    names = ("SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
    return ["-v", f"{bundle}:{inside}:ro", *(x for n in names for x in ("-e", f"{n}={inside}"))]


def lent_python() -> list[str]:
    """The host's interpreter for setup.sh, where it is the grader's Python minor: this check
    cannot download one as Gradescope's setup does. Mounted at its own path (pyenv's finds its
    libpython there) and named by CS336_GRADER_PYTHON; none where the minor differs."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" != grader_python():
        return []
    prefix = Path(sys.base_prefix)
    python = Path(sys._base_executable)  # the interpreter behind this venv
    if not python.is_relative_to(prefix):
        return []
    return ["-v", f"{prefix}:{prefix}:ro", "-e", f"CS336_GRADER_PYTHON={python}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rootfs", type=Path, default=ROOTFS, help="the debootstrap tree")
    parser.add_argument("--work", type=Path, default=REPO_ROOT / "dist" / "gradescope-docker")
    args = parser.parse_args(argv)
    if shutil.which("docker") is None:
        print(
            "gradescope-docker: docker is not installed (apt-get install docker.io)",
            file=sys.stderr,
        )
        return 2
    ensure_image(args.rootfs)
    shutil.rmtree(args.work, ignore_errors=True)
    (args.work / "out").mkdir(parents=True)
    with zipfile.ZipFile(build(args.work / "autograder.zip")) as archive:
        archive.extractall(args.work / "in" / "source")
    folders = submissions(args.work)
    policy_submissions(args.work, folders["reference"])
    shutil.copyfile(RUN_SH, args.work / "in" / "run.sh")
    cache = Path.home() / ".cache" / "uv"
    cache.mkdir(parents=True, exist_ok=True)
    run([
        "docker", "run", "--rm",
        "-v", f"{args.work / 'in'}:/work-in:ro",
        "-v", f"{args.work / 'out'}:/work-out",
        "-v", f"{cache}:/root/.cache/uv",
        *certificate_options(),
        *lent_python(),
        IMAGE, "bash", "/work-in/run.sh",
    ])  # fmt: skip
    from course.grading.judge import load_rubric

    results = json.loads((args.work / "out" / "reference.json").read_text())
    print("isolation:", json.dumps(results.get("extra_data", {}).get("isolation"), indent=1))
    problems = check(args.work / "out", load_rubric().total)
    problems += policy_problems(args.work / "out", load_rubric().total)
    for problem in problems:
        print(f"FAILED {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
