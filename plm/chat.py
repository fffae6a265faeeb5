"""One call to an LLM behind any OpenAI-compatible chat endpoint (OpenAI, vLLM, llama.cpp's
server, Ollama's /v1, LiteLLM, ...), standard library HTTP only: what the `llm_rewrite`
expander and the `llm` query generator share.

`ChatConfig` holds the endpoint's settings (a stage's Config subclasses it), `ChatClient.ask`
POSTs the messages to {base_url}/chat/completions and returns the reply's content within
`timeout_ms` (the call runs in a daemon thread, so a server that trickles bytes cannot hold
the caller past it). No redirect is followed (the key goes to base_url's origin only), a
runaway body is never read whole, and every failure is one `ChatFailed` line that never holds
the API key; what to do with it (fall back, stop) is the stage's choice.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import re
import threading
import time
import urllib.error
import urllib.request
from string import Formatter
from typing import Any
from urllib.parse import unquote as unquote_url
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, PrivateAttr, field_validator, model_validator

from plm import ComponentConfig, ConfigError, PlmUserError
from plm.remote import NO_REDIRECTS, RedirectRefused, bearer_key, scrub

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1 << 20  # an answer is a few hundred bytes; never read a runaway body whole
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Reasoning models served through Ollama or vLLM put their thoughts in the content.
THINKING = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
# "1. ", "2) ", "(3) ", "- ", "* ", "• ", "Query: ", "Rewritten query: " before a query.
_LINE_PREFIX = re.compile(
    r"^\s*(?:\(?\d{1,2}[.)]\s+|[-*\u2022+]\s+)?(?:(?:rewritten |search |alternative )?query\s*\d*\s*:\s*)?",
    re.IGNORECASE,
)
_QUOTES = {'"': '"', "'": "'", "`": "`", "\u201c": "\u201d"}


class ChatFailed(Exception):
    """Why the LLM's answer cannot be used (one line, never holding the API key)."""


def unquote(text: str) -> str:
    """The text without one pair of surrounding quotes ("...", '...', `...`, “...”)."""
    if len(text) >= 2 and _QUOTES.get(text[0]) == text[-1]:
        return text[1:-1].strip()
    return text


def parse_reply(content: str) -> list[str]:
    """The queries in a reply: one a line, numbering, bullets, "Query:" labels and
    surrounding quotes removed, empty lines and a <think> block dropped."""
    queries = []
    for line in THINKING.sub("", content).splitlines():
        text = unquote(_LINE_PREFIX.sub("", line, count=1).strip())
        if text:
            queries.append(text)
    return queries


class ChatConfig(ComponentConfig):
    """The endpoint settings of a stage that asks an LLM (its Config subclasses this)."""

    base_url: str
    """The API's base URL, e.g. "http://127.0.0.1:11434/v1" (Ollama) or
    "https://api.openai.com/v1"; requests go to {base_url}/chat/completions."""
    model: str = Field(min_length=1)
    """The model name the endpoint serves, e.g. "gpt-4o-mini" or "llama3.2"."""
    api_key_env: str = "OPENAI_API_KEY"
    """The environment variable holding the API key (sent as `Authorization: Bearer`);
    unset or "": no Authorization header, which local servers accept."""
    system: str = ""
    """An optional system message sent before the prompt."""
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    """Sampling temperature; 0 keeps answers (and evaluations) repeatable."""
    timeout_ms: int = Field(2000, ge=1, le=600_000)
    """The time budget of one call."""

    _login: str | None = PrivateAttr(None)  # "user:password" from base_url, sent as Basic auth

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError('expected an http:// or https:// URL, e.g. "http://127.0.0.1:11434/v1"')
        return value

    @model_validator(mode="after")
    def _login_apart(self) -> ChatConfig:
        """`http://user:password@host/v1`: the login is kept apart and sent as Basic auth, and
        base_url holds no password, so no message, report or `plm config check` prints it."""
        parts = urlsplit(self.base_url)
        if "@" in parts.netloc:
            login, host = parts.netloc.rsplit("@", 1)
            user, _, password = login.partition(":")
            object.__setattr__(self, "base_url", urlunsplit(parts._replace(netloc=host)))
            self._login = f"{unquote_url(user)}:{unquote_url(password)}"
        return self


def renderable_prompt(value: str | None, sample: dict[str, Any], where: str) -> str | None:
    """A prompt template's check (a pydantic validator's body): it renders with `sample`'s
    placeholders, and holds the first of them, which goes `where`; ValueError says why not."""
    if value is None:
        return value
    names = " and ".join(f"{{{name}}}" for name in sample)
    try:
        fields = {name for _, name, _, _ in Formatter().parse(value) if name is not None}
        value.format(**sample)
    except (ValueError, KeyError, IndexError, AttributeError) as err:
        raise ValueError(
            f"cannot be rendered ({type(err).__name__}: {err}); it may use {names}, "
            "and a literal brace is written {{ or }}"
        ) from None
    required = next(iter(sample))
    if required not in fields:
        raise ValueError(f"must contain {{{required}}}, where {where}")
    return value


def check_key_env(config: ChatConfig, what: str) -> None:
    """ConfigError when `api_key_env` holds what looks like a key, not a variable's name.
    Not a pydantic validator: its error would echo the value, which may be the key itself."""
    if config.api_key_env and not _ENV_NAME.fullmatch(config.api_key_env):
        raise ConfigError(
            f"{what}: `api_key_env` must name an environment variable (letters, digits, _), not hold the key; "
            'e.g. api_key_env = "OPENAI_API_KEY" and export the key in it'
        )


class ChatClient:
    """Asks the endpoint of a `ChatConfig`; `name` names the worker thread and debug lines."""

    def __init__(self, config: ChatConfig, name: str) -> None:
        self.config = config
        self.name = name

    @property
    def endpoint(self) -> str:
        base = self.config.base_url
        return base if base.endswith("/chat/completions") else f"{base}/chat/completions"

    def ask(self, messages: list[dict[str, str]]) -> str:
        """The reply's content within `timeout_ms`, or ChatFailed (scrubbed of any key)."""
        try:
            return self._ask(messages)
        except ChatFailed as err:
            raise ChatFailed(scrub(str(err))) from None

    def _ask(self, messages: list[dict[str, str]]) -> str:
        budget = self.config.timeout_ms / 1000
        box: list[str | BaseException] = []

        def call() -> None:
            try:
                box.append(self._post(messages, budget))
            except BaseException as err:  # handed to the caller, which turns it into one line
                box.append(err)

        start = time.perf_counter()
        worker = threading.Thread(target=call, name=self.name, daemon=True)
        worker.start()
        worker.join(budget)
        if not box:
            raise ChatFailed(f"{self.endpoint} did not answer within timeout_ms = {self.config.timeout_ms}")
        result = box[0]
        if isinstance(result, ChatFailed):
            raise result
        if isinstance(result, BaseException):  # a bug or an odd OS error: still one line
            raise ChatFailed(f"the call to {self.endpoint} failed: {type(result).__name__}: {result}")
        log.debug("%s answered in %.0f ms", self.name, 1000 * (time.perf_counter() - start))
        return result

    def _post(self, messages: list[dict[str, str]], timeout: float) -> str:
        c = self.config
        body = json.dumps({"model": c.model, "messages": messages, "temperature": c.temperature}).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = self._api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        elif c._login is not None:  # a login in base_url, when no key is set
            headers["Authorization"] = "Basic " + base64.b64encode(c._login.encode()).decode("ascii")
        request = urllib.request.Request(self.endpoint, data=body, headers=headers, method="POST")
        try:
            try:
                with NO_REDIRECTS.open(request, timeout=timeout) as response:
                    raw = response.read(MAX_BODY_BYTES + 1)
            except RedirectRefused as err:  # the key goes to base_url's origin only
                raise ChatFailed(
                    f"{err}; redirects are not followed: set base_url to the address that answers"
                ) from None
            except urllib.error.HTTPError as err:
                raise ChatFailed(f"{self.endpoint} answered {err.code} {err.reason}{_error_message(err)}") from None
            except http.client.HTTPException as err:  # a dropped connection, a bad status line
                raise ChatFailed(f"{self.endpoint} sent a broken HTTP answer ({type(err).__name__})") from None
            except (urllib.error.URLError, OSError) as err:
                reason = getattr(err, "reason", err)
                if isinstance(err, TimeoutError) or isinstance(reason, TimeoutError):
                    raise ChatFailed(f"{self.endpoint} did not answer within timeout_ms = {c.timeout_ms}") from None
                raise ChatFailed(f"cannot reach {self.endpoint}: {reason}") from None
            if len(raw) > MAX_BODY_BYTES:
                raise ChatFailed(f"{self.endpoint} answered more than {MAX_BODY_BYTES:,} bytes")
            return _content(raw, self.endpoint)
        except ChatFailed as err:
            # Some servers quote the key (or the login) they refused; it must not reach a log.
            password = c._login.partition(":")[2] if c._login else None
            raise ChatFailed(scrub(str(err), key, password)) from None

    def _api_key(self) -> str | None:
        """The key from the environment, surrounding whitespace (a file's trailing newline)
        removed; ChatFailed naming the variable, never the value, if it cannot be a header."""
        try:
            return bearer_key(self.config.api_key_env) if self.config.api_key_env else None
        except PlmUserError as err:
            raise ChatFailed(str(err)) from None


def _content(raw: bytes, where: str) -> str:
    """choices[0].message.content of an OpenAI-style chat completion, or ChatFailed."""
    try:
        content = json.loads(raw)["choices"][0]["message"]["content"]
    except ValueError:
        raise ChatFailed(f"{where} did not answer with JSON") from None
    except (KeyError, IndexError, TypeError):
        raise ChatFailed(f"{where} answered JSON without choices[0].message.content") from None
    if not isinstance(content, str):
        raise ChatFailed(f"{where} answered a non-text message content ({type(content).__name__})")
    return content


def _error_message(err: urllib.error.HTTPError) -> str:
    """The server's message from an error body ({"error": {"message"}} or text) as ": ...", short."""
    try:
        raw = err.read(4096).decode("utf-8", "replace")
    except OSError:
        return ""
    try:
        data = json.loads(raw)
        error = data.get("error", data) if isinstance(data, dict) else data
        message = error.get("message", "") if isinstance(error, dict) else str(error)
    except ValueError:
        message = raw
    message = " ".join(str(message).split())
    return f": {message[:200]}" if message else ""
