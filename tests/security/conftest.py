"""Fixtures for the security tests: test certificates made on the fly."""

from __future__ import annotations

import pytest

from tests.security.pki import Pki, make_pki

#: The user a client certificate names (EXTERNAL login).
CERT_USER = "cert-user"


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A CA, server, expired-server and client certificates, generated for this test session."""
    return make_pki(tmp_path_factory.mktemp("pki"), CERT_USER)
