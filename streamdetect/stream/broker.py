"""A real Apache Kafka broker on 127.0.0.1, for tests, demos and users without a cluster.

Kafka's jars come from Maven Central through Maven (``mvn dependency:copy-dependencies`` of
``org.apache.kafka:kafka_2.13``), once, into the cache (:func:`streamdetect.io.cache.cache_dir`). A broker
runs in KRaft mode as its own controller (static ``controller.quorum.voters``): its storage is formatted
afresh at every start, then ``kafka.Kafka`` runs in a new session with ``-Xmx512m``, and :func:`start`
returns once a Metadata request lists the broker (an open port is not enough: the broker accepts
connections before it has joined its own quorum). Each broker keeps its files, its log and its pid in
``broker-<port>/`` beside the jars, so several can run side by side and :func:`stop` finds the one on a
port.

Measured on this machine: a cold fetch takes 10-35 s (43 MB of jars), a start 3-7 s, the broker
uses 330-500 MB. Kafka 4.1.1 brings slf4j-api 1.7, so the log4j 2 binding is ``log4j-slf4j-impl`` (with
``log4j-slf4j2-impl`` the broker logs nothing); Maven 3.8 would pick a maven-dependency-plugin too old
for Java 17 unless it is pinned.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from streamdetect.errors import StreamdetectError
from streamdetect.io.cache import cache_dir

KAFKA_VERSION = "4.1.1"
LOG4J_VERSION = "2.24.3"
DEPENDENCY_PLUGIN_VERSION = "3.8.1"
DEFAULT_PORT = 9092
_PLAIN_WORD = re.compile(r"[A-Za-z0-9._-]+")

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>streamdetect</groupId>
  <artifactId>{name}</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-dependency-plugin</artifactId>
        <version>{plugin}</version>
      </plugin>
    </plugins>
  </build>
</project>
"""


def maven_pom(name: str, artifacts: list[tuple[str, str, str]]) -> str:
    """A POM that depends on ``artifacts`` (group, artifact, version) and a log4j 2 backend bound to SLF4J
    1.7 (what Kafka 4.1 brings), with a maven-dependency-plugin recent enough for Java 17."""
    log4j = [("org.apache.logging.log4j", artifact, LOG4J_VERSION) for artifact in ("log4j-slf4j-impl", "log4j-core")]
    dependencies = "\n".join(
        f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId><version>{version}</version>"
        "</dependency>"
        for group, artifact, version in [*artifacts, *log4j]
    )
    return _POM.format(name=name, dependencies=dependencies, plugin=DEPENDENCY_PLUGIN_VERSION)


_SERVER = """process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs={data}
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# A local broker: the log cleaner and the retention check look every second, not every 15 s and 5 min
# (a compacted topic, or a short retention a test sets, shows its effect at once).
log.cleaner.backoff.ms=1000
log.retention.check.interval.ms=1000
"""

# A second listener with SASL (PLAIN and SCRAM) for trying and testing authenticated clients: PLAIN users
# are listed in the listener's JAAS line, SCRAM credentials are written into the storage when formatting.
_SASL = """listeners={listeners},SASL_PLAINTEXT://127.0.0.1:{sasl_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_plaintext.plain.sasl.jaas.config=\\
  org.apache.kafka.common.security.plain.PlainLoginModule required {plain};
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=\\
  org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=\\
  org.apache.kafka.common.security.scram.ScramLoginModule required;
"""

_LOG4J = """status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = file
"""


def log4j_properties(log: Path, level: str, extra: str = "") -> str:
    """A log4j 2 configuration writing to ``log`` at ``level`` (``extra``: more lines, such as a logger's)."""
    return _LOG4J.format(log=log, level=level) + extra


class BrokerError(StreamdetectError):
    """A local broker could not be fetched, started or stopped; says what to install or what it logged."""


@dataclass(frozen=True)
class Broker:
    """A broker started by :func:`start`."""

    port: int
    pid: int
    home: Path

    @property
    def bootstrap(self) -> str:
        """The address clients connect to."""
        return f"127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        """The broker's own log (warnings and errors)."""
        return self.home / "broker.log"


def missing_tools() -> list[str]:
    """What a local broker needs and this machine lacks (``java``, ``mvn``)."""
    return [tool for tool in ("java", "mvn") if shutil.which(tool) is None]


def require_tools() -> None:
    """Raise :class:`BrokerError` naming what to install when Java or Maven is missing."""
    missing = missing_tools()
    if missing:
        raise BrokerError(
            f"a local Kafka broker needs {' and '.join(missing)} on the PATH: install a JDK 17 or newer and "
            "Maven (Debian: apt install openjdk-17-jdk-headless maven), or give --bootstrap-servers of a "
            "running cluster"
        )


def kafka_jars(progress: Callable[[str], None] | None = None) -> Path:
    """The directory of Kafka's jars (and a log4j 2 backend), fetched with Maven on first use."""
    require_tools()
    pom = maven_pom("kafka-broker", [("org.apache.kafka", "kafka_2.13", KAFKA_VERSION)])
    what = f"Apache Kafka {KAFKA_VERSION}"
    return maven_jars(cache_dir() / f"kafka-{KAFKA_VERSION}", pom, f"kafka_2.13-{KAFKA_VERSION}.jar", what, progress)


def maven_jars(home: Path, pom: str, expected: str, what: str, progress: Callable[[str], None] | None) -> Path:
    """``home/libs``: the jars ``pom`` depends on, copied by Maven from Maven Central on first use.

    Idempotent: a complete fetch leaves a marker; an interrupted one is redone from scratch. ``expected``
    names a jar that must be among them."""
    libs = home / "libs"
    marker = home / "complete"
    if marker.exists():
        return libs
    if progress is not None:
        progress(f"fetching {what} from Maven Central (once)")
    home.mkdir(parents=True, exist_ok=True)
    (home / "pom.xml").write_text(pom)
    partial = home / "libs.partial"
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(libs, ignore_errors=True)
    command = [
        "mvn",
        "-q",
        "-B",
        "-f",
        str(home / "pom.xml"),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={partial}",
        "-DincludeScope=runtime",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0 or not (partial / expected).exists():
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
        raise BrokerError(f"Maven could not fetch {what} ({' '.join(command)}): {tail}")
    partial.rename(libs)
    marker.touch()
    return libs


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for tests: a broker per run on a port nobody uses)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _home(port: int) -> Path:
    return cache_dir() / f"broker-{port}"


def alive(pid: int) -> bool:
    """Whether the process ``pid`` runs (a process of another user's counts; a child of ours that
    exited is reaped first, or it would stay a zombie that looks alive)."""
    _reap(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running(port: int = DEFAULT_PORT) -> Broker | None:
    """The broker :func:`start` left running on ``port``, if its process is alive."""
    home = _home(port)
    try:
        pid = int((home / "pid").read_text())
    except (FileNotFoundError, ValueError):
        return None
    return Broker(port, pid, home) if alive(pid) else None


def answers(bootstrap: str, timeout_s: float = 2.0) -> bool:
    """Whether a Metadata request to ``bootstrap`` lists at least one broker."""
    # The Kafka client loads only when a broker is probed (`streamdetect --help` stays quick).
    from kafka import KafkaAdminClient  # noqa: PLC0415
    from kafka.errors import KafkaError  # noqa: PLC0415

    try:
        admin = KafkaAdminClient(
            bootstrap_servers=bootstrap,
            client_id="streamdetect-broker-probe",
            request_timeout_ms=int(timeout_s * 1000),
            bootstrap_timeout_ms=int(timeout_s * 1000),
        )
    except (KafkaError, OSError, ValueError):
        return False
    try:
        return bool(admin.describe_cluster().get("brokers"))
    except (KafkaError, OSError, ValueError):
        return False
    finally:
        admin.close()


def tail(path: Path, lines: int = 5) -> str:
    """The last ``lines`` of a log file, or ``(no log)``."""
    try:
        return "\n".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def start(
    port: int = DEFAULT_PORT,
    *,
    timeout_s: float = 90.0,
    log_level: str = "WARN",
    progress: Callable[[str], None] | None = None,
    sasl_port: int | None = None,
    sasl_users: Mapping[str, str] | None = None,
) -> Broker:
    """Start one KRaft broker on 127.0.0.1:``port`` (its controller on a free port) and wait until it
    answers; return it. A broker this function started on the port and still running is returned as is.
    With ``sasl_port``, a second listener there takes SASL_PLAINTEXT logins (PLAIN, SCRAM-SHA-256 and
    SCRAM-SHA-512) of ``sasl_users`` (name -> password; letters, digits, ``._-`` only).

    Raises :class:`BrokerError` when Java or Maven is missing, the port is taken by something else, or
    the broker does not answer within ``timeout_s`` (with the end of its log).
    """
    already = running(port)
    if already is not None:
        return already
    libs = kafka_jars(progress)
    if _port_in_use(port):
        raise BrokerError(f"port {port} on 127.0.0.1 is in use by another program: choose another with --port")
    home = _home(port)
    shutil.rmtree(home, ignore_errors=True)
    data = home / "data"
    data.mkdir(parents=True)
    controller = free_port()
    properties = home / "server.properties"
    server = _SERVER.format(port=port, controller=controller, data=data)
    scram: list[str] = []
    if sasl_port is not None:
        users = dict(sasl_users or {})
        if not users or not all(_PLAIN_WORD.fullmatch(part) for pair in users.items() for part in pair):
            raise BrokerError("a SASL listener needs users given as NAME:PASSWORD of letters, digits, '.', '_', '-'")
        if _port_in_use(sasl_port) or sasl_port == port:
            raise BrokerError(f"port {sasl_port} on 127.0.0.1 is in use: choose another SASL port")
        plain = " ".join(f'user_{name}="{password}"' for name, password in users.items())
        listeners = f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}"
        # Java properties: the later lines override the plain listener's.
        server += _SASL.format(listeners=listeners, port=port, sasl_port=sasl_port, plain=plain)
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            for name, password in users.items():
                scram += ["--add-scram", f"{mechanism}=[name={name},password={password}]"]
    properties.write_text(server)
    log4j = home / "log4j2.properties"
    log4j.write_text(log4j_properties(home / "broker.log", log_level))
    java = ["java", f"-Dlog4j2.configurationFile={log4j}", "-cp", str(libs / "*")]
    cluster = _cluster_id()
    formatted = subprocess.run(
        [*java, "kafka.tools.StorageTool", "format", "-t", cluster, "-c", str(properties), *scram],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if formatted.returncode != 0:
        raise BrokerError(f"formatting the broker's storage failed: {(formatted.stdout + formatted.stderr).strip()}")
    if progress is not None:
        progress(f"starting a Kafka {KAFKA_VERSION} broker on 127.0.0.1:{port}")
    with (home / "stdout.log").open("wb") as out:
        process = subprocess.Popen(
            [*java[:1], "-Xmx512m", *java[1:], "kafka.Kafka", str(properties)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # outlives the command that started it, until `broker stop`
        )
    (home / "pid").write_text(str(process.pid))
    broker = Broker(port, process.pid, home)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BrokerError(
                f"the Kafka broker on port {port} exited with code {process.returncode}: "
                f"{tail(broker.log)} {tail(home / 'stdout.log')}"
            )
        if answers(broker.bootstrap):
            return broker
        time.sleep(0.5)
    stop(port)
    raise BrokerError(f"the Kafka broker on port {port} did not answer within {timeout_s:.0f} s: {tail(broker.log)}")


def stop(port: int = DEFAULT_PORT, *, timeout_s: float = 30.0) -> bool:
    """Stop the broker :func:`start` left on ``port`` (SIGTERM, then SIGKILL after ``timeout_s``) and
    remove its files; False when none was running."""
    broker = running(port)
    home = _home(port)
    if broker is None:
        shutil.rmtree(home, ignore_errors=True)
        return False
    terminate(broker.pid, timeout_s)
    shutil.rmtree(home, ignore_errors=True)
    return True


def terminate(pid: int, timeout_s: float) -> None:
    """Stop the process group ``pid`` leads (a server started in a session of its own): SIGTERM, then
    SIGKILL after ``timeout_s``; returns once it is gone."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        while alive(pid):
            time.sleep(0.1)


def _reap(pid: int) -> None:
    """Collect the exit status when the broker is our own child (else it stays a zombie, 'alive')."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _cluster_id() -> str:
    """A random KRaft cluster id: a UUID in URL-safe base64, never starting with '-' (the storage tool's
    argument parser would take it for an option; Kafka's own ``Uuid.randomUuid`` redraws those too)."""
    while True:
        cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster.startswith("-"):
            return cluster
