"""The GitHub workflows (.github/workflows) cannot rot unseen: every `make` command one runs exists in the
Makefile (with the variables it passes), every action is pinned to a version, the published address is
the one _config.yml and the README give, and Colab's runtimes file says when and where it was read.
(`make lint` runs actionlint over the same files: expressions, action inputs, the job graph.)
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

from tools import learner_path

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
PAGES_URL = "https://sharding-in-jax.github.io/sharding-in-jax/"


def makefile_targets(text: str) -> set[str]:
    """The targets a Makefile defines (rules `a b: ...`, not variable assignments `A := ...`)."""
    targets = set()
    for line in text.splitlines():
        match = re.match(r"^([A-Za-z0-9_.%/ -]+):(?![=])", line)
        if match and not line.startswith("\t"):
            targets |= set(match.group(1).split())
    return targets


def make_commands(script: str) -> list[tuple[list[str], dict[str, str]]]:
    """Each `make` command of a shell script: (its targets, the variables it sets)."""
    commands = []
    for line in script.replace("\\\n", " ").splitlines():
        for part in re.split(r"&&|\|\||;|\|", line):
            try:
                words = shlex.split(part, comments=True)
            except ValueError:
                words = part.split()
            if not words or words[0] != "make":
                continue
            flags = [w for w in words[1:] if "=" in w and not w.startswith("-")]
            targets = [w for w in words[1:] if "=" not in w and not w.startswith("-")]
            commands.append((targets, dict(w.split("=", 1) for w in flags)))
    return commands


def _steps(workflow: dict) -> list[dict]:
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def test_the_three_workflows_exist():
    # Property: tests on every push and pull request, the Pages deployment from main, the weekly canary.
    assert [p.name for p in WORKFLOWS] == ["canary.yml", "pages.yml", "tests.yml"]
    on = {p.stem: _load(p)[True] for p in WORKFLOWS}  # YAML 1.1 reads the key `on` as True
    assert set(on["tests"]) >= {"push", "pull_request"}
    assert on["pages"]["push"]["branches"] == ["main"]
    assert "schedule" in on["canary"] and "workflow_dispatch" in on["canary"]


def test_each_make_command_a_workflow_runs_exists_in_the_makefile():
    # Property: a renamed or removed make target, or a variable the Makefile no longer reads, fails here
    # rather than in a workflow nobody watches.
    makefile = (ROOT / "Makefile").read_text()
    targets = makefile_targets(makefile)
    seen = []
    for path in WORKFLOWS:
        for step in _steps(_load(path)):
            for names, variables in make_commands(step.get("run", "")):
                assert names, f"{path.name}: `make` with no target in {step['run']!r}"
                for name in names:
                    assert name in targets, f"{path.name}: make {name} is not a target of the Makefile"
                    seen.append(name)
                for variable in variables:
                    assert f"$({variable})" in makefile, f"{path.name}: the Makefile never reads {variable}"
    assert {"test", "book", "pdf", "learner-path"} <= set(seen)


def test_the_scan_of_make_commands_reads_what_a_shell_runs():
    # Property: the parser behind the test above finds targets and variables where a shell would.
    script = 'echo go && make test\nmake learner-path LEARNER_PATH_FLAGS="--runtime latest"  # walk\n'
    assert make_commands(script) == [
        (["test"], {}),
        (["learner-path"], {"LEARNER_PATH_FLAGS": "--runtime latest"}),
    ]
    assert "lint" in makefile_targets("lint: venv\n\t$(BIN)/ruff check .\nFOO := bar\n")
    assert "FOO" not in makefile_targets("FOO := bar\n")


def test_every_action_is_pinned_to_a_version():
    # Property: `uses:` names a release (vN, vN.N.N) or a commit, never a moving branch.
    for path in WORKFLOWS:
        for step in _steps(_load(path)):
            if "uses" in step:
                assert re.fullmatch(r"[\w.-]+/[\w./-]+@(v\d+(\.\d+){0,2}|[0-9a-f]{40})", step["uses"]), (
                    f"{path.name}: {step['uses']} is not pinned to a version"
                )


def test_pages_are_deployed_with_the_official_actions_to_the_address_the_book_gives():
    # Property: the site is uploaded and deployed by GitHub's own Pages actions, with the PDF built
    # first, and the address is the one the README and _config.yml name.
    uses = [
        step.get("uses", "").split("@")[0] for step in _steps(_load(ROOT / ".github/workflows/pages.yml"))
    ]
    assert "actions/upload-pages-artifact" in uses and "actions/deploy-pages" in uses
    runs = [step.get("run", "") for step in _steps(_load(ROOT / ".github/workflows/pages.yml"))]
    assert runs.index("make pdf") < len(runs) and runs.index("make book") < runs.index("make pdf")
    assert PAGES_URL in (ROOT / "README.md").read_text()
    assert PAGES_URL.rstrip("/") in (ROOT / "_config.yml").read_text()


def test_colabs_runtimes_say_when_and_where_they_were_read():
    # Property: one file holds Colab's runtimes, dated and sourced; the first (the default) is Python
    # 3.13 with JAX 0.7.2, and each runtime preinstalls a pinned JAX, jaxlib and NumPy.
    runtimes, read = learner_path.load_runtimes()
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", read["on"]) and read["from"].strip()
    assert [(r.name, r.python) for r in runtimes] == [("latest", "3.13"), ("26.07", "3.12")]
    assert "jax==0.7.2" in runtimes[0].packages and "numpy==2.1.3" in runtimes[0].packages
    for runtime in runtimes:
        pins = {learner_path._name(p) for p in runtime.packages if "==" in p}
        assert {"jax", "jaxlib", "numpy", "flax", "optax", "orbax-checkpoint"} <= pins, runtime.name
    newest = runtimes[0].requirements("newest")
    assert newest[:2] == ["jax", "jaxlib"] and not any(p.startswith("jax==") for p in newest)
    assert runtimes[0].requirements()[-len(learner_path.ALWAYS) :] == learner_path.ALWAYS


def test_the_canary_walks_a_runtime_the_file_names():
    # Property: the canary's --runtime is a runtime of tools/colab_runtimes.toml.
    names = {r.name for r in learner_path.load_runtimes()[0]}
    text = (ROOT / ".github/workflows/canary.yml").read_text()
    walked = re.findall(r"--runtime (\S+)", text)
    assert walked and set(walked) <= names
