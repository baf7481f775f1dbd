"""What a pack must never hold: values of secret-like names, and credentials inside any value.

* a name is secret-like when one of its words (split at ``_ - . /`` and camelCase) is a secret word —
  token, tok, tkn, cred(ential)s, secret, passwd/password/pass/pwd, key/apikey, auth, cookie,
  session, private, signature, cert — or ends in one (``HFTOKEN``, ``myApiKey``); words that only look
  alike stay visible: ``TOKENIZERS_PARALLELISM``, ``pad_token_id``, ``num_key_value_heads``, ``max_tokens``;
* in every string value, the user-info of a URL (``https://user:pass@host`` → ``https://<redacted>@host``),
  the values of secret-named query parameters (``?token=...``, ``&sig=...``) and of secret-named flags of a
  command line (``--mytok VALUE``, ``--api-key=VALUE``, ``--password 'a b'``) are replaced.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "<redacted>"

_SECRET_WORDS = frozenset({
    "tok", "tkn", "token", "cred", "creds", "credential", "credentials", "secret", "secrets", "passwd",
    "password", "passwords", "pass", "passphrase", "pwd", "key", "apikey", "auth", "authorization", "authtoken",
    "oauth", "cookie", "cookies", "session", "sessionid", "sessions", "private", "privatekey", "signature", "sig",
    "cert", "certificate", "jwt", "bearer",
})
_SECRET_ENDINGS = ("token", "tok", "tkn", "apikey", "secret", "passwd", "password", "pwd", "cookie", "credential",
                   "credentials")
#: "token"/"key" followed by one of these names a model quantity, not a secret (pad_token_id, key_value_heads);
#: "key_id" stays secret (ACCESS_KEY_ID)
_HARMLESS_AFTER = {
    "token": frozenset({"id", "ids", "type", "types", "dropout", "embedding", "embeddings", "len", "length",
                        "count", "num", "index", "per", "size", "sizes", "dim"}),
    "key": frozenset({"value", "values", "size", "sizes", "dim", "dims", "heads", "channels", "len", "length",
                      "proj", "bias", "norm", "layernorm", "padding", "mask", "states"}),
}
#: "token" after one of these is a special token of a tokenizer (pad_token: "<pad>"), not a secret
_HARMLESS_BEFORE = frozenset({"pad", "eos", "bos", "unk", "sep", "cls", "mask", "special", "start", "end", "max",
                              "num", "min", "image", "audio", "video", "default", "decoder", "sot", "eot"})
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^\s/?#@]+)@")
_QUERY = re.compile(r"([?&;])([^=&;#\s]+)=([^&;#\s]*)")
#: a flag of a command line and its value: ``--name=VALUE`` or ``--name VALUE`` (quoted, or one word not a flag)
_FLAG = re.compile(r"""(?<![\w-])(--[A-Za-z][\w.-]*)(=|\s+)("[^"]*"|'[^']*'|(?!--)\S+)""")


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(name)]


def is_secret(name: str) -> bool:
    """Whether a variable, argument or key named ``name`` holds a secret (see the module docstring)."""
    words = _words(str(name))
    for i, word in enumerate(words):
        after = words[i + 1] if i + 1 < len(words) else ""
        before = words[i - 1] if i else ""
        harmless = _HARMLESS_AFTER.get(word)
        if harmless is not None and (after in harmless or (word == "token" and before in _HARMLESS_BEFORE)):
            continue
        if word in _SECRET_WORDS:
            return True
        if any(word.endswith(end) and len(word) >= len(end) + 2 for end in _SECRET_ENDINGS):  # mytok, hfpassword
            return True
    return False


def redact_text(text: str) -> str:
    """``text`` with URL credentials, secret query parameters and secret flags' values replaced by
    ``<redacted>``."""
    if "@" not in text and "=" not in text and "--" not in text:
        return text
    text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    text = _QUERY.sub(lambda m: f"{m.group(1)}{m.group(2)}={REDACTED}" if is_secret(m.group(2)) else m.group(0),
                      text)
    return _FLAG.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}" if is_secret(m.group(1)) else m.group(0), text)


def redact_value(value: Any, depth: int = 0) -> Any:
    """``value`` with every string inside it passed through :func:`redact_text` (lists and dicts walked)."""
    if isinstance(value, str):
        return redact_text(value)
    if depth > 32:
        return value
    if isinstance(value, list):
        return [redact_value(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(redact_value(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return {k: REDACTED if is_secret(str(k)) else redact_value(v, depth + 1) for k, v in value.items()}
    return value


def redact(name: str, value: Any) -> Any:
    """The value a pack may hold for ``name``: ``<redacted>`` for a secret-like name, else ``value`` with
    credentials inside it removed."""
    return REDACTED if is_secret(name) else redact_value(value)
