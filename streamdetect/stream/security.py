"""Kafka security settings (SASL, SSL) read from the environment, for every client streamdetect opens.

A deployment sets them once, beside ``STREAMDETECT_BOOTSTRAP_SERVERS``; ``publish``, ``worker``,
``findings`` and ``bench stream`` pass them to kafka-python (producers, admin clients, consumers) and to
Faust (aiokafka, through ``broker_credentials``) alike:

==========================================  ===============================================================
``STREAMDETECT_KAFKA_SECURITY_PROTOCOL``    ``PLAINTEXT`` (default), ``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``
``STREAMDETECT_KAFKA_SASL_MECHANISM``       ``PLAIN`` (default), ``SCRAM-SHA-256``, ``SCRAM-SHA-512``
``STREAMDETECT_KAFKA_SASL_USERNAME``        required with SASL
``STREAMDETECT_KAFKA_SASL_PASSWORD``        required with SASL (never logged)
``STREAMDETECT_KAFKA_SSL_CAFILE``           PEM file of the CAs to trust (default: the system's)
``STREAMDETECT_KAFKA_SSL_CERTFILE``         PEM client certificate, for brokers that require one
``STREAMDETECT_KAFKA_SSL_KEYFILE``          its private key (default: in the certificate file)
``STREAMDETECT_KAFKA_SSL_KEY_PASSWORD``     the key's password, if it has one
``STREAMDETECT_KAFKA_SSL_CHECK_HOSTNAME``   ``true`` (default) or ``false``
==========================================  ===============================================================

One SSL context serves both client libraries, so they trust and present the same certificates. A wrong
value stops the command at its start with the variable's name and what is wrong (exit code 2), never
with a client's traceback half-way.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from streamdetect.errors import StreamdetectError

PREFIX = "STREAMDETECT_KAFKA_"
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: Every variable read (a deployment passes these through).
VARIABLES = tuple(
    PREFIX + name
    for name in (
        "SECURITY_PROTOCOL",
        "SASL_MECHANISM",
        "SASL_USERNAME",
        "SASL_PASSWORD",
        "SSL_CAFILE",
        "SSL_CERTFILE",
        "SSL_KEYFILE",
        "SSL_KEY_PASSWORD",
        "SSL_CHECK_HOSTNAME",
    )
)


class SecurityError(StreamdetectError):
    """A Kafka security variable of the environment is missing, unknown or unusable."""


@dataclass(frozen=True)
class KafkaSecurity:
    """How clients authenticate to the brokers and protect the connection (module docstring)."""

    protocol: str = "PLAINTEXT"
    mechanism: str = "PLAIN"
    username: str | None = None
    password: str | None = None
    cafile: Path | None = None
    certfile: Path | None = None
    keyfile: Path | None = None
    key_password: str | None = None
    check_hostname: bool = True

    def __repr__(self) -> str:  # the password stays out of logs and tracebacks
        return f"KafkaSecurity(protocol={self.protocol}, mechanism={self.mechanism}, username={self.username})"

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> KafkaSecurity:
        """The settings of ``environ`` (default: the process environment), checked: the protocol and
        mechanism are known, SASL has a username and password, files exist and the SSL context loads
        them. Raises :class:`SecurityError` naming the variable at fault."""
        env = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            value = env.get(PREFIX + name, "").strip()
            return value or None

        protocol = (get("SECURITY_PROTOCOL") or "PLAINTEXT").upper()
        if protocol not in PROTOCOLS:
            raise SecurityError(f"{PREFIX}SECURITY_PROTOCOL is {protocol!r}; use one of {', '.join(PROTOCOLS)}")
        mechanism = (get("SASL_MECHANISM") or "PLAIN").upper()
        if mechanism not in MECHANISMS:
            raise SecurityError(f"{PREFIX}SASL_MECHANISM is {mechanism!r}; use one of {', '.join(MECHANISMS)}")
        hostname = (get("SSL_CHECK_HOSTNAME") or "true").lower()
        if hostname not in ("true", "false", "1", "0", "yes", "no"):
            raise SecurityError(f"{PREFIX}SSL_CHECK_HOSTNAME is {hostname!r}; use true or false")
        files = {}
        for name in ("SSL_CAFILE", "SSL_CERTFILE", "SSL_KEYFILE"):
            value = get(name)
            if value is not None and not Path(value).is_file():
                raise SecurityError(f"{PREFIX}{name}: {value} is not a readable file")
            files[name] = Path(value) if value is not None else None
        security = cls(
            protocol=protocol,
            mechanism=mechanism,
            username=get("SASL_USERNAME"),
            password=env.get(PREFIX + "SASL_PASSWORD") or None,  # spaces may be part of a password
            cafile=files["SSL_CAFILE"],
            certfile=files["SSL_CERTFILE"],
            keyfile=files["SSL_KEYFILE"],
            key_password=env.get(PREFIX + "SSL_KEY_PASSWORD") or None,
            check_hostname=hostname in ("true", "1", "yes"),
        )
        if security.sasl and (security.username is None or security.password is None):
            raise SecurityError(
                f"{PREFIX}SECURITY_PROTOCOL is {protocol}: set {PREFIX}SASL_USERNAME and {PREFIX}SASL_PASSWORD"
            )
        if not security.tls and any(files.values()):
            raise SecurityError(
                f"SSL files are set but {PREFIX}SECURITY_PROTOCOL is {protocol}: use SSL or SASL_SSL, "
                "or unset the SSL variables"
            )
        _ = security.ssl_context  # load the files now: a bad certificate is a start-up error
        return security

    @cached_property
    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of SSL and SASL_SSL (None otherwise): the CA file or the system's CAs, the client
        certificate when given, hostname checking unless turned off. Built once: kafka-python and Faust
        get the same context."""
        if not self.tls:
            return None
        try:
            context = ssl.create_default_context(cafile=str(self.cafile) if self.cafile else None)
            if not self.check_hostname:
                context.check_hostname = False
            if self.certfile is not None:
                context.load_cert_chain(
                    str(self.certfile), str(self.keyfile) if self.keyfile else None, self.key_password
                )
        except (ssl.SSLError, OSError) as error:
            raise SecurityError(f"the SSL files of {PREFIX}SSL_CAFILE/CERTFILE/KEYFILE do not load: {error}") from None
        return context

    def client_settings(self) -> dict[str, Any]:
        """Keyword arguments for kafka-python's KafkaProducer, KafkaConsumer and KafkaAdminClient."""
        settings: dict[str, Any] = {"security_protocol": self.protocol}
        if self.sasl:
            settings |= {
                "sasl_mechanism": self.mechanism,
                "sasl_plain_username": self.username,
                "sasl_plain_password": self.password,
            }
        if self.tls:
            settings["ssl_context"] = self.ssl_context
        return settings

    def faust_credentials(self) -> Any:
        """Faust's ``broker_credentials`` (None for PLAINTEXT): what its aiokafka consumers, producers and
        admin calls authenticate with."""
        from faust.auth import SASLCredentials, SSLCredentials  # noqa: PLC0415 (Faust loads in the worker only)

        if self.sasl:
            return SASLCredentials(
                username=self.username,
                password=self.password,
                ssl_context=self.ssl_context,
                mechanism=self.mechanism,
            )
        if self.tls:
            return SSLCredentials(self.ssl_context)
        return None


def from_environment() -> KafkaSecurity:
    """The process environment's settings (:meth:`KafkaSecurity.from_environment`)."""
    return KafkaSecurity.from_environment()
