"""A real PostgreSQL server for the tests: a cluster made by ``initdb`` in a temporary folder, with
``wal_level = logical``, listening on loopback on a free port, removed at the end.

The binaries are the distribution's (``/usr/lib/postgresql/<version>/bin``, or on the PATH). PostgreSQL
refuses to run as root, so as root the cluster belongs to the ``postgres`` user and its commands run as
that user (``runuser``). Logins over TCP take a password (SCRAM), given to clients in ``PGPASSWORD``, as a
publisher's environment would: never in a topology.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

USER, PASSWORD, DATABASE = "publisher", "not-a-secret-7", "hospital"


def binaries() -> Path | None:
    """The folder of the newest PostgreSQL server binaries (15 or newer), if any."""
    found = sorted(
        (Path(path).parent for path in glob.glob("/usr/lib/postgresql/*/bin/initdb")),
        key=lambda folder: int(folder.parent.name) if folder.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1]
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class LocalPostgres:
    """A running test cluster; ``uri`` names its database without the password."""

    folder: Path
    port: int
    bin: Path

    @property
    def uri(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{DATABASE}"

    def _run(self, *command: str) -> None:
        as_owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        result = subprocess.run([*as_owner, *command], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed: {result.stdout}{result.stderr}")

    @classmethod
    def start(cls) -> LocalPostgres:
        bin_folder = binaries()
        if bin_folder is None:
            raise RuntimeError("no PostgreSQL server binaries: install them (Debian: apt install postgresql)")
        folder = Path(tempfile.mkdtemp(prefix="streamdetect-pg-"))
        if os.geteuid() == 0:
            shutil.chown(folder, "postgres", "postgres")
        server = cls(folder, _free_port(), bin_folder)
        (folder / "password").write_text(PASSWORD + "\n")
        if os.geteuid() == 0:
            shutil.chown(folder / "password", "postgres", "postgres")
        server._run(
            str(bin_folder / "initdb"),
            "-D",
            str(folder / "data"),
            "-U",
            USER,
            f"--pwfile={folder / 'password'}",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "--locale=C",
            "--encoding=UTF8",
        )
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={server.port} -c unix_socket_directories={folder} "
            "-c wal_level=logical -c max_replication_slots=8 -c max_wal_senders=8 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off"
        )
        server._run(
            str(bin_folder / "pg_ctl"),
            "-D",
            str(folder / "data"),
            "-o",
            options,
            "-l",
            str(folder / "log"),
            "-w",
            "start",
        )
        server._run(str(bin_folder / "createdb"), "-h", str(folder), "-p", str(server.port), "-U", USER, DATABASE)
        return server

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def execute(self, *statements: str) -> None:
        """Run SQL as the publisher (the tests' setup of tables, views and changes)."""
        import psycopg

        with psycopg.connect(self.uri, password=PASSWORD, autocommit=True) as connection:
            for statement in statements:
                connection.execute(statement)  # type: ignore[arg-type]
