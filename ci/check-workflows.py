#!/usr/bin/env python3
"""Checks the GitHub Actions workflows in ci/github/ without GitHub: each
parses as YAML and has the shape Actions needs (triggers; jobs with runs-on
and steps; each step a `uses` or a `run`), and every ci/ script a step runs
exists and is executable. Exit 1, naming each fault, when one does not.

Needs PyYAML (`pip install pyyaml`, or Debian's python3-yaml)."""

import pathlib
import re
import sys

import yaml

REPO = pathlib.Path(__file__).resolve().parent.parent


def check(path: pathlib.Path) -> list[str]:
    faults = []
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        return [f"{path}: not YAML: {e}"]
    if not isinstance(doc, dict):
        return [f"{path}: not a mapping"]
    # YAML 1.1 reads a bare `on` key as the boolean true.
    if "on" not in doc and True not in doc:
        faults.append(f"{path}: no `on` triggers")
    jobs = doc.get("jobs")
    if not isinstance(jobs, dict) or not jobs:
        return faults + [f"{path}: no jobs"]
    for name, job in jobs.items():
        where = f"{path}: job {name}"
        if not isinstance(job, dict):
            faults.append(f"{where}: not a mapping")
            continue
        if "runs-on" not in job:
            faults.append(f"{where}: no runs-on")
        needs = job.get("needs", [])
        for need in needs if isinstance(needs, list) else [needs]:
            if need not in jobs:
                faults.append(f"{where}: needs unknown job {need}")
        steps = job.get("steps")
        if not isinstance(steps, list) or not steps:
            faults.append(f"{where}: no steps")
            continue
        for i, step in enumerate(steps):
            if not isinstance(step, dict) or ("uses" in step) == ("run" in step):
                faults.append(f"{where}: step {i + 1} needs exactly one of uses/run")
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
        print(f"workflow {path.relative_to(REPO)}: {'FAULTY' if any(f.startswith(str(path)) for f in faults) else 'ok'}")
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
