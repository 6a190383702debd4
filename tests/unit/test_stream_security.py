"""Kafka security settings read from the environment: checked at start, one line naming the variable."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

import pytest

from streamdetect.stream.security import KafkaSecurity, SecurityError

SASL = {
    "STREAMDETECT_KAFKA_SECURITY_PROTOCOL": "sasl_plaintext",
    "STREAMDETECT_KAFKA_SASL_MECHANISM": "scram-sha-256",
    "STREAMDETECT_KAFKA_SASL_USERNAME": "alice",
    "STREAMDETECT_KAFKA_SASL_PASSWORD": "s3cret",
}


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate and its key (PEM), made by the openssl command."""
    if shutil.which("openssl") is None:
        pytest.skip("the TLS settings tests need the openssl command (Debian: apt install openssl)")
    home = tmp_path_factory.mktemp("tls")
    cert, key = home / "client.pem", home / "client.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=streamdetect-test",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_nothing_set_is_plaintext_without_credentials() -> None:
    security = KafkaSecurity.from_environment({})
    assert security.client_settings() == {"security_protocol": "PLAINTEXT"}
    assert security.faust_credentials() is None


def test_sasl_settings_reach_both_clients_and_the_password_stays_out_of_repr() -> None:
    security = KafkaSecurity.from_environment(SASL)
    assert security.client_settings() == {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "s3cret",
    }
    credentials = security.faust_credentials()
    assert (credentials.protocol.value, credentials.mechanism.value) == ("SASL_PLAINTEXT", "SCRAM-SHA-256")
    assert (credentials.username, credentials.password) == ("alice", "s3cret")
    assert "s3cret" not in repr(security)
    assert "s3cret" not in repr(credentials)


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        ({"STREAMDETECT_KAFKA_SECURITY_PROTOCOL": "TLS"}, "SECURITY_PROTOCOL is 'TLS'; use one of PLAINTEXT"),
        ({**SASL, "STREAMDETECT_KAFKA_SASL_MECHANISM": "GSSAPI"}, "SASL_MECHANISM is 'GSSAPI'"),
        ({**SASL, "STREAMDETECT_KAFKA_SASL_PASSWORD": ""}, "set STREAMDETECT_KAFKA_SASL_USERNAME and"),
        (
            {"STREAMDETECT_KAFKA_SECURITY_PROTOCOL": "SSL", "STREAMDETECT_KAFKA_SSL_CAFILE": "/nonexistent/ca.pem"},
            "STREAMDETECT_KAFKA_SSL_CAFILE: /nonexistent/ca.pem is not a readable file",
        ),
        ({"STREAMDETECT_KAFKA_SSL_CHECK_HOSTNAME": "maybe"}, "SSL_CHECK_HOSTNAME is 'maybe'"),
    ],
)
def test_a_bad_variable_is_named(environment: dict[str, str], message: str) -> None:
    with pytest.raises(SecurityError, match=message.replace("(", r"\(")):
        KafkaSecurity.from_environment(environment)


def test_ssl_files_under_a_plain_protocol_are_refused(certificate: tuple[Path, Path]) -> None:
    with pytest.raises(SecurityError, match="SSL files are set but STREAMDETECT_KAFKA_SECURITY_PROTOCOL is PLAINTEXT"):
        KafkaSecurity.from_environment({"STREAMDETECT_KAFKA_SSL_CAFILE": str(certificate[0])})


def test_ssl_context_trusts_the_ca_file_and_presents_the_client_certificate(certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    security = KafkaSecurity.from_environment(
        {
            **SASL,
            "STREAMDETECT_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "STREAMDETECT_KAFKA_SSL_CAFILE": str(cert),
            "STREAMDETECT_KAFKA_SSL_CERTFILE": str(cert),
            "STREAMDETECT_KAFKA_SSL_KEYFILE": str(key),
            "STREAMDETECT_KAFKA_SSL_CHECK_HOSTNAME": "false",
        }
    )
    context = security.client_settings()["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert [item["subject"] for item in context.get_ca_certs()] == [((("commonName", "streamdetect-test"),),)]
    assert context.check_hostname is False
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert security.faust_credentials().protocol.value == "SASL_SSL"


def test_a_file_that_is_not_a_certificate_is_refused_at_start(tmp_path: Path) -> None:
    garbage = tmp_path / "ca.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(SecurityError, match="do not load"):
        KafkaSecurity.from_environment(
            {"STREAMDETECT_KAFKA_SECURITY_PROTOCOL": "SSL", "STREAMDETECT_KAFKA_SSL_CAFILE": str(garbage)}
        )
