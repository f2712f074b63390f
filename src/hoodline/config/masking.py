"""Secret masking: the one list of key markers that makes a configuration value secret.

Every place that shows configuration (the pipeline config's ``repr``/``describe``, the Kafka
source's client properties, option error messages) masks through this module, so a key is either
secret everywhere or nowhere.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping

#: A key is secret when it contains one of these (case-insensitive): SASL/SSL passwords, private
#: keys, JAAS configs, OAuth client secrets, tokens, credentials.
SECRET_MARKERS: tuple[str, ...] = (
    "password", "secret", "jaas", "key.pem", "token", "credential",
    # object stores: Azure account and SAS keys (also under Azure's aliases access_key and
    # master_key, and in a connection string), GCS service account keys
    "account_key", "sas_key", "access_key", "master_key", "connection_string",
    # Schema Registry basic auth ("user:password") and its bearer / OAuth settings
    "user.info",
)
#: What a secret value is shown as.
MASK = "***"


#: words of a key that make it secret however they are spelt: a misspelt key
#: (``sasl.pasword``) is refused by the client, but not before a log of the configuration
#: showed its value (Kafka review)
_SECRET_WORDS = ("password", "passwd", "secret", "token", "credential", "credentials")
_WORD = re.compile(r"[a-z0-9]+")


def _near_secret_word(word: str) -> bool:
    return len(word) >= 4 and any(
        difflib.SequenceMatcher(None, word, secret).ratio() >= 0.8 for secret in _SECRET_WORDS)


def is_secret_key(key: str) -> bool:
    """True for keys whose values must never be shown (see :data:`SECRET_MARKERS`), also when a
    word of the key is a near miss of a secret one (``pasword``, ``secert``)."""
    low = key.lower()
    return (any(marker in low for marker in SECRET_MARKERS)
            or any(_near_secret_word(w) for w in _WORD.findall(low)))


#: ``scheme://user:password@`` in a URL (clients such as the Schema Registry's take basic-auth
#: credentials there)
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/@:\s]*:)[^/@\s]*(?P<at>@)")


def mask_url_credentials(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@host`` masked."""
    return _URL_PASSWORD.sub(lambda m: f"{m['head']}{MASK}{m['at']}", text)


def mask_secrets(values: Mapping[str, object]) -> dict[str, object]:
    """A copy safe to log: values of secret keys replaced by :data:`MASK`, passwords inside
    URLs masked."""
    return {k: (MASK if is_secret_key(k)
                else mask_url_credentials(v) if isinstance(v, str) else v)
            for k, v in values.items()}


def mask_all_but(values: Mapping[str, object], shown: frozenset[str]) -> dict[str, object]:
    """A copy safe to log where only the values of the keys in ``shown`` (lower case) are kept:
    for settings such as an object store's, where a misspelt key or one of a provider's many
    aliases may hold a secret no marker names."""
    return {k: (v if k.lower() in shown and not is_secret_key(k) else MASK)
            for k, v in values.items()}


class MaskedDict(dict[str, object]):
    """A plain dict whose ``repr``/``str`` mask secret values (the real values stay readable)."""

    def __repr__(self) -> str:
        return repr(mask_secrets(self))

    __str__ = __repr__
