"""Builds a Go program of tests/log/interop against Debian's golang.org/x/mod
(the reference signed-note and tlog code), offline, or skips the test."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

GOPATH = Path("/usr/share/gocode")
INTEROP = Path(__file__).resolve().parent / "interop"


def build(name: str, where: Path, needs: str = "note") -> Path:
    """``interop/<name>.go`` built into ``where``; ``needs``: the x/mod/sumdb package it imports."""
    go = shutil.which("go")
    if go is None or not (GOPATH / "src/golang.org/x/mod/sumdb" / needs).is_dir():
        pytest.skip("Go or golang.org/x/mod is missing (`make go` installs Debian's "
                    "golang-go and golang-golang-x-mod-dev)")
    binary = where / name
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": str(GOPATH), "GOFLAGS": "",
           "GOCACHE": str(where / "cache"), "GOPROXY": "off"}
    subprocess.run([go, "build", "-o", str(binary), str(INTEROP / f"{name}.go")], env=env,
                   check=True, capture_output=True, timeout=300)
    return binary
