"""Run ``corgipile proxy`` as another OS user: ``python proxy_as_user.py USER
ARGS...`` (as root) imports the client, drops to USER (uid, gid, no
supplementary groups) and runs ``corgipile proxy ARGS...``.

Why not ``runuser -u USER -- python -m corgipile``: the test environment's
interpreter lives under /root (pyenv), which other users cannot enter. The
network identity of the proxy is what matters here (the uid that peer
authentication reads with SO_PEERCRED when the proxy connects), and it is
USER's from the first connection on.
"""

from __future__ import annotations

import os
import pwd
import sys

import corgipile.cli  # everything the proxy imports, before the switch
import corgipile.proxy.analysis
import corgipile.proxy.server  # noqa: F401
from corgipile.cli import main


def drop_to(user: str) -> None:
    entry = pwd.getpwnam(user)
    os.setgroups([])
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)
    os.environ["HOME"] = entry.pw_dir
    os.environ["USER"] = os.environ["LOGNAME"] = user
    assert os.getuid() == entry.pw_uid and os.geteuid() == entry.pw_uid


if __name__ == "__main__":
    drop_to(sys.argv[1])
    os.chdir("/")
    raise SystemExit(main(["proxy", *sys.argv[2:]]))
