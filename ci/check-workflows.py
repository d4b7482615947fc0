#!/usr/bin/env python3
"""hilt's own rules for the GitHub Actions workflows in ci/github/, the ones
the two tools ci/check-workflows.sh runs first do not cover
(check-jsonschema checks the workflow schema; zizmor --offline checks pinning,
persisted credentials, permissions, injection, triggers):

- Farm jobs (runs-on with `self-hosted`, `hilt-farm` or a `board-NAME`
  label) only in workflows no pull request can start: triggers `schedule`
  and `workflow_dispatch` only; with `workflow_dispatch`, the job's `if:`
  limits it to the default branch (`github.event.repository.default_branch`).
  A farm host is a machine on a LAN wired to real boards, and a self-hosted
  runner is not wiped between jobs: a fork's code must never reach it.
- Every action pinned by full commit hash carries its release as a comment
  (`uses: owner/repo@<40 hex> # v1.2.3`), so a bump is a readable diff
  (zizmor checks the hash, not the comment).
- Every ci/ script a step runs exists and is executable.
- Every `needs` names a job of the workflow.
- A workflow that runs hilt's test or scenario scripts requires the
  conformance sets (top-level `env: HILT_CONFORMANCE_REQUIRED: "1"`):
  without it a runner that lacks them prints "skipped" and passes, so the
  figures the sets hold would go unchecked unnoticed.

Exit 1, naming each fault, when one does not hold. Needs PyYAML (pinned in
ci/requirements-ci.txt)."""

import pathlib
import re
import sys

import yaml

REPO = pathlib.Path(__file__).resolve().parent.parent

FARM_TRIGGERS = {"schedule", "workflow_dispatch"}
PINNED = re.compile(r"^\s*-?\s*uses:\s*([^\s@#]+)@([0-9a-f]{40})\s+#\s*v\d+(\.\d+)*\s*$")
USES = re.compile(r"^\s*-?\s*uses:\s*(\S+)")


def triggers(doc: dict) -> set[str]:
    # YAML 1.1 reads a bare `on` key as the boolean true.
    on = doc.get("on", doc.get(True))
    if isinstance(on, str):
        return {on}
    if isinstance(on, list):
        return set(on)
    return set(on or {})


def labels(job: dict) -> list[str]:
    runs_on = job.get("runs-on", [])
    if isinstance(runs_on, dict):  # {group: …, labels: …}
        runs_on = runs_on.get("labels", [])
    return [runs_on] if isinstance(runs_on, str) else [str(x) for x in runs_on]


def is_farm(job: dict) -> bool:
    return any(l in ("self-hosted", "hilt-farm") or l.startswith("board-") for l in labels(job))


def check(file: pathlib.Path) -> list[str]:
    faults = []
    path = file.relative_to(REPO)
    text = file.read_text()
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:  # check-jsonschema names it too
        return [f"{path}: not YAML: {e}"]
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), dict):
        return [f"{path}: no jobs"]  # check-jsonschema says more
    jobs = doc["jobs"]
    on = triggers(doc)
    env = doc.get("env") if isinstance(doc.get("env"), dict) else {}
    if re.search(r"\bci/run-(tests|scenarios)\.sh\b", text) and str(
        env.get("HILT_CONFORMANCE_REQUIRED", "")
    ) != "1":
        faults.append(
            f'{path}: runs ci/run-tests.sh or ci/run-scenarios.sh without env HILT_CONFORMANCE_REQUIRED: "1" '
            "(a runner without the conformance sets would skip their suites and pass)"
        )

    for n, line in enumerate(text.splitlines(), 1):
        m = USES.match(line)
        if m and not m.group(1).startswith("./") and not PINNED.match(line):
            faults.append(
                f"{path}:{n}: `{m.group(1)}` is not pinned as `owner/repo@<40-hex commit> # vX.Y.Z`"
            )

    for name, job in jobs.items():
        where = f"{path}: job {name}"
        if not isinstance(job, dict):
            continue
        needs = job.get("needs", [])
        for need in needs if isinstance(needs, list) else [needs]:
            if need not in jobs:
                faults.append(f"{where}: needs unknown job {need}")
        if is_farm(job):
            if on - FARM_TRIGGERS:
                faults.append(
                    f"{where}: runs on the farm ({', '.join(labels(job))}) in a workflow also "
                    f"triggered by {', '.join(sorted(on - FARM_TRIGGERS))}: farm jobs only "
                    f"on {' and '.join(sorted(FARM_TRIGGERS))}"
                )
            if "workflow_dispatch" in on and "github.event.repository.default_branch" not in str(
                job.get("if", "")
            ):
                faults.append(
                    f"{where}: runs on the farm on workflow_dispatch without an `if:` that limits "
                    "it to github.event.repository.default_branch"
                )
        for i, step in enumerate(job.get("steps") or []):
            if not isinstance(step, dict):
                continue
            for script in re.findall(r"\bci/[\w./-]+\.(?:sh|py)\b", str(step.get("run", ""))):
                target = REPO / script
                if not target.is_file():
                    faults.append(f"{where}: step {i + 1} runs missing {script}")
                elif not target.stat().st_mode & 0o111:
                    faults.append(f"{where}: step {i + 1} runs {script}, which is not executable")
    return faults


def main() -> int:
    files = sorted((REPO / "ci" / "github").glob("*.yml"))
    if not files:
        print("no workflows in ci/github/", file=sys.stderr)
        return 1
    faults = [f for path in files for f in check(path)]
    for fault in faults:
        print(fault, file=sys.stderr)
    for path in files:
        bad = any(f.startswith(f"{path.relative_to(REPO)}:") for f in faults)
        print(f"workflow {path.relative_to(REPO)}: {'FAULTY' if bad else 'ok'}")
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
