"""Model text -> text Slack shows literally: no pings, no disguised links.

* every `&`, `<`, `>` from the model is escaped, so `<!channel>`, `<@U123>`, `<#C1>` or
  `<https://evil|click>` shows as typed and can neither ping anyone nor disguise a link;
* `@channel`, `@here`, `@everyone` get a zero-width joiner after the `@`;
* a link whose text names another URL, domain or e-mail address than its target is written out
  plainly as `text (url)`;
* bidi embeddings, overrides and isolates are dropped, so no text reads other than it is.
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit

ZWJ = "\u200d"
ZWSP = "\u200b"
LINK_SCHEMES = frozenset({"http", "https", "mailto"})

# "@here" etc., but not the domain of an e-mail address such as ops@here.com.
_MENTION_WORD = re.compile(r"@(?=(?:channel|here|everyone)\b(?!\.\w))", re.IGNORECASE)
_BACKTICK_RUN = re.compile(r"(?<=``)(?=`)")
# Embeddings, overrides, isolates (LRE RLE PDF LRO RLO, LRI RLI FSI PDI): they reorder the
# text after them. LRM, RLM and ALM cannot reorder letters and RTL writing needs them: they go
# only from link text, where they could hide a domain from the disguise check.
_REORDERING = re.compile("[\u202a-\u202e\u2066-\u2069]")
_DIRECTIONAL = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
_URL_UNSAFE = re.compile(r"[\s|<>\"`]")

# What a link's visible text must not contain unless it names the link's own target.
_EMAIL = re.compile(r"[\w.+-]+@((?:[^\W_](?:[\w-]*[^\W_])?\.)+[^\W\d_]{2,63})(?![\w-])")
_SCHEME_URL = re.compile(r"[a-z][a-z0-9+.-]*://([^\s/?#|<>]+)", re.IGNORECASE)
_DOMAIN = re.compile(
    r"(?<![\w.])((?:[^\W_](?:[\w-]{0,61}[^\W_])?\.)+[^\W\d_]{2,63})(?!\w|\.[^\W_])"
)
_IPV4 = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w.])")


def escape(text: str) -> str:
    """Escape `&`, `<`, `>` as Slack requires, and drop the bidi controls that reorder text."""
    return strip_bidi(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def strip_bidi(text: str) -> str:
    """Drop the bidi embeddings, overrides and isolates; keep the direction marks."""
    return _REORDERING.sub("", text)


def neutralise_mentions(text: str) -> str:
    """Put a zero-width joiner after the `@` of `@channel`, `@here` and `@everyone`.

    Applied to prose and link text; code is left verbatim (Slack notifies no one from code).
    """
    return _MENTION_WORD.sub("@" + ZWJ, text)


def prose(raw: str) -> str:
    """Model prose -> mrkdwn: escaped, broadcast words neutralised, no ``` runs."""
    return break_fences(neutralise_mentions(escape(raw)))


def verbatim(raw: str) -> str:
    """Model code -> mrkdwn: escaped (Slack needs it even in code) and no ``` runs."""
    return break_fences(escape(raw))


def break_fences(text: str) -> str:
    """Slack has no way to show ``` inside text or code; break such runs with a zero-width space."""
    return _BACKTICK_RUN.sub(ZWSP, text)


def link(href: str, raw_text: str) -> str:
    """A Markdown link -> `<url|text>`, `<url>`, plain words, or `text (url)` if disguised."""
    text = " ".join(_DIRECTIONAL.sub("", raw_text).split())
    url = href.strip()
    try:
        parts = urlsplit(url)
        linkable = parts.scheme.lower() in LINK_SCHEMES and bool(
            parts.netloc or parts.scheme.lower() == "mailto"
        )
    except ValueError:
        linkable = False
    if not linkable:
        # Not a link we are willing to make: keep the words, drop the target.
        return prose(text) if text else prose(url)
    safe_url = escape(_URL_UNSAFE.sub(lambda m: quote(m.group(), safe=""), url))
    label = re.sub(r"[|<>]", "", text).strip()
    if not label:
        return f"<{safe_url}>"
    if is_disguised(label, url):
        return f"{prose(text)} ({safe_url})"
    return f"<{safe_url}|{prose(label)}>"


def _norm_host(host: str) -> str:
    host = host.strip().lower().rstrip(".")
    if "@" in host:
        host = host.rsplit("@", 1)[1]
    if ":" in host and not host.startswith("["):
        host = host.split(":", 1)[0]
    try:
        host = host.encode("idna").decode("ascii")
    except UnicodeError:
        pass
    return host.removeprefix("www.")


def is_disguised(label: str, url: str) -> bool:
    """Does the link text name a different site (or address) than the link goes to?"""
    parts = urlsplit(url)
    if parts.scheme.lower() == "mailto":
        address = parts.path.lower()
        target = _norm_host(address.rsplit("@", 1)[-1]) if "@" in address else ""
    else:
        address = ""
        target = _norm_host(parts.hostname or "")

    def same_site(shown: str) -> bool:
        shown = _norm_host(shown)
        return bool(target) and (shown == target or target.endswith("." + shown))

    for email in _EMAIL.finditer(label):
        if email.group(0).lower() != address:
            return True
    rest = _EMAIL.sub(" ", label)
    for found in _SCHEME_URL.finditer(rest):
        if not same_site(found.group(1)):
            return True
    rest = _SCHEME_URL.sub(" ", rest)
    for pattern in (_DOMAIN, _IPV4):
        for found in pattern.finditer(rest):
            if not same_site(found.group(0)):
                return True
    return False
