"""The client image: its PyPI pins against requirements-dev.txt, every
dependency of the client pinned, the demo's imports and data; and the
compose file that runs it (needs PyYAML, skipped without it)."""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from docker_helpers import (
    CLIENT_DOCKERFILE,
    DB_DOCKERFILE,
    DOCKER,
    ROOT,
    control_version,
    parse_dockerfile,
)

# ---------------------------------------------------------------------------
# The client image

def project_name(requirement: str) -> str:
    """The normalised project name of a requirement ("psycopg[binary]>=3" ->
    "psycopg"), as PyPI compares them."""
    name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement).group(1)
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements-dev.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==")
            pins[project_name(name)] = version.strip()
    return pins


def client_pip_install() -> list[str]:
    (stage,) = parse_dockerfile(CLIENT_DOCKERFILE)
    runs = [shlex.split(i.args) for i in stage.all("RUN") if "pip install" in i.args]
    assert len(runs) == 1
    words = runs[0]
    return words[words.index("install") + 1:]


def client_image_pins() -> dict[str, str]:
    pins = {}
    for arg in client_pip_install():
        if not arg.startswith("-") and "/" not in arg:
            assert "==" in arg, f"{arg}: not pinned"
            pins[project_name(arg)] = arg.split("==")[1]
    return pins


def test_client_image_pins_what_the_tests_pin():
    pinned, tested = client_image_pins(), requirement_pins()
    assert pinned
    for name, version in pinned.items():
        assert tested[name] == version, name
    assert "/opt/corgipile/python_client" in client_pip_install()


def test_client_image_pins_every_dependency_of_the_client():
    import tomllib

    project = tomllib.loads((ROOT / "python_client" / "pyproject.toml").read_text())["project"]
    needed = {project_name(r) for r in project.get("dependencies", [])}
    assert needed - set(client_image_pins()) == set()


def test_client_image_installs_what_the_demo_imports():
    tree = ast.parse((ROOT / "scripts" / "demo.py").read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"__future__"}
    # the scripts copied beside it, which it imports from its own directory
    (stage,) = parse_dockerfile(CLIENT_DOCKERFILE)
    beside = {Path(w).stem for ins in stage.all("COPY") for w in ins.flags_and_words()[1][:-1]
              if w.startswith("scripts/") and w.endswith(".py")}
    assert "demo" in beside
    provided = set(client_image_pins()) | {"corgipile"} | beside
    assert third_party <= provided


def test_client_image_has_the_data_and_runs_the_demo():
    (stage,) = parse_dockerfile(CLIENT_DOCKERFILE)
    apt = [shlex.split(i.args) for i in stage.all("RUN") if "apt-get install" in i.args]
    assert len(apt) == 1
    packages = [w.split("=")[0] for w in apt[0] if re.match(r"^[a-z0-9][a-z0-9.+-]*=", w)]
    assert packages == ["dataset-fashion-mnist"]
    # the demo reads the directory that package installs
    source = (ROOT / "scripts" / "demo.py").read_text()
    data_dir = re.search(r'^DATA = Path\("([^"]+)"\)', source, re.M).group(1)
    assert data_dir == "/usr/share/datasets/fashion-mnist"
    owner = subprocess.run(["dpkg", "-S", data_dir], capture_output=True, text=True)
    if owner.returncode == 0:
        assert owner.stdout.split(":")[0] == "dataset-fashion-mnist"

    copies = {}
    for ins in stage.all("COPY"):
        *sources, dest = ins.flags_and_words()[1]
        copies.update(dict.fromkeys(sources, dest))
    assert copies["scripts/demo.py"] == copies["scripts/provenance.py"] == "/opt/corgipile/"
    assert copies["python_client/"] == "/opt/corgipile/python_client/"
    assert [i.args for i in stage.all("CMD")] == ['["python", "/opt/corgipile/demo.py"]']
    assert stage.all("USER")[-1].args != "root"


# ---------------------------------------------------------------------------
# The compose file

def test_compose_file():
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")
    compose = yaml.safe_load((DOCKER / "docker-compose.yml").read_text())
    db, client = compose["services"]["db"], compose["services"]["client"]

    assert (DOCKER / db["build"]["context"]).resolve() == ROOT
    assert (DOCKER / client["build"]["context"]).resolve() == ROOT
    assert db["build"]["dockerfile"] == str(DB_DOCKERFILE.relative_to(ROOT))
    assert client["build"]["dockerfile"] == str(CLIENT_DOCKERFILE.relative_to(ROOT))
    # tagged with the one version; the base image overridable, by default
    # the Dockerfile's own
    version = control_version()
    assert db["image"] == f"corgipile-postgres:{version}"
    assert client["image"] == f"corgipile-client:{version}"
    for service, dockerfile in ((db, DB_DOCKERFILE), (client, CLIENT_DOCKERFILE)):
        default = parse_dockerfile(dockerfile)[-1].base_image
        assert re.fullmatch(rf"\$\{{CORGIPILE_\w*BASE_IMAGE:-{re.escape(default)}\}}",
                            service["build"]["args"]["BASE_IMAGE"])

    # PostgreSQL's fast shutdown (the image's STOPSIGNAL) gets time to finish
    # its checkpoint before compose sends SIGKILL: 10 s by default
    grace = re.fullmatch(r"(\d+)(s|m)", db["stop_grace_period"])
    assert grace and int(grace.group(1)) * (60 if grace.group(2) == "m" else 1) >= 60

    volume, _, target = db["volumes"][0].partition(":")
    assert volume in compose["volumes"] and target == "/var/lib/postgresql/data"
    assert db["healthcheck"]["test"] == ["CMD", "corgipile-healthcheck.sh"]
    assert re.fullmatch(r"127\.0\.0\.1:\$\{CORGIPILE_PORT:-\d+\}:5432", db["ports"][0])

    assert client["depends_on"] == {"db": {"condition": "service_healthy"}}
    assert client["command"] == ["python", "/opt/corgipile/demo.py"]
    # Python as PID 1 ignores SIGTERM: an init process forwards it
    assert client["init"] is True and compose["services"]["proxy"]["init"] is True
    # the client connects as the db service's user, to its database
    denv, cenv = db["environment"], client["environment"]
    assert cenv["PGHOST"] == "db" and cenv["PGPORT"] == "5432"
    assert cenv["PGUSER"] == denv["POSTGRES_USER"]
    assert cenv["PGPASSWORD"] == denv["POSTGRES_PASSWORD"]
    assert cenv["PGDATABASE"] == denv["POSTGRES_DB"]
    assert denv["CORGIPILE_PRELOAD"] == "${CORGIPILE_PRELOAD:-off}"


def test_compose_proxy_service():
    """corgipile proxy in front of db: the client image's CLI, published on
    loopback only, pointed at the db service, and given no credentials."""
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")
    compose = yaml.safe_load((DOCKER / "docker-compose.yml").read_text())
    proxy, client = compose["services"]["proxy"], compose["services"]["client"]
    # the client's image, built once, by the client service: a build section
    # here too would build it a second time
    assert "build" not in proxy and proxy["image"] == client["image"]
    assert proxy["pull_policy"] == "never"
    builds = [s["build"]["dockerfile"] for s in compose["services"].values() if "build" in s]
    assert sorted(builds) == sorted({*builds})
    assert proxy["depends_on"] == {"db": {"condition": "service_healthy"}}
    cmd = proxy["command"]
    assert cmd[:2] == ["corgipile", "proxy"]
    listen = cmd[cmd.index("--listen") + 1]
    upstream = cmd[cmd.index("--upstream") + 1]
    assert listen.endswith(":6432") and upstream == "host=db port=5432"
    assert re.fullmatch(r"127\.0\.0\.1:\$\{CORGIPILE_PROXY_PORT:-\d+\}:6432", proxy["ports"][0])
    assert not any("PASSWORD" in k for k in proxy.get("environment", {}))
    # the image's CLI has the subcommand and takes these arguments
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python_client"))
    r = subprocess.run([sys.executable, "-P", "-m", "corgipile", *cmd[1:], "--help"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "--upstream" in r.stdout, r.stderr
