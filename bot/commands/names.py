"""A session named in a command by its id or its display name, resolved to one id.

Together's ids are UUIDs, and any word the store already knows as a session's
id (watched, or named by this channel's subscriptions, rules or budgets) is an
id: neither costs a request. Another id-shaped word is first asked for by id
when the command reads the session anyway (`fetch`), and taken as a name when
Together has no session with that id. A name is looked up in one read of
Together's list (every status, at most `NAME_PAGES` pages, charged to the
command like any of its requests): a listed session with that id, else those
whose display name is the word (exactly, else ignoring case). One is used;
several or none are answered by the caller (`bot.rendering.named`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.commands.as_poll import fetch_for_user
from bot.commands.asker import Asker
from bot.commands.deps import CommandDeps
from bot.commands.parser import Command, parse
from bot.commands.session_ref import as_typed
from bot.store.queries.known_sessions import known_session
from bot.together.errors import TogetherError
from bot.together.list_pass import Lister
from bot.training.sessions import TrainingSession, is_session_id

#: pages of the org's list read for one name (100 sessions each)
NAME_PAGES = 5
#: the verbs that read the session anyway: an id-shaped word is tried as an id first
FETCHING = frozenset({"show", "subscribe", "chart"})
_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")


@dataclass(frozen=True)
class Named:
    """What a word names: one session (`session_id`, with the session when it was
    read), or `matches`, several or none (`complete`: the list was read to its end)."""

    word: str
    session_id: str | None = None
    session: TrainingSession | None = None
    matches: tuple[TrainingSession, ...] = ()
    complete: bool = True


async def resolve(
    deps: CommandDeps, asker: Asker, word: str, *, lister: Lister, fetch: bool
) -> Named:
    """The session `word` names for this asker's channel (see the module's words).
    A failure to read Together raises `TogetherError`, worded for the person."""
    if is_session_id(word):
        if _UUID_RE.fullmatch(word) or await _known(deps, asker, word):
            return Named(word, word)
        if fetch:
            try:
                return Named(word, word, await fetch_for_user(deps.together, word))
            except TogetherError as exc:
                if exc.kind != "not_found":
                    raise
    return await by_name(lister, word)


async def by_name(lister: Lister, word: str) -> Named:
    """The sessions one read of Together's list has under this id or name."""
    # A read begun now, or one running now (names asked at once share it): a
    # session created a moment ago is found by its name.
    listed = await lister.get((), max_pages=NAME_PAGES, since=lister.clock())
    lister.forget(())
    if listed.error is not None and not len(listed):
        raise listed.error
    complete = listed.complete and listed.error is None
    if word in listed:
        session = listed.session(word)
        return Named(word, session.id, session)
    name = as_typed(word)
    sessions = list(listed.sessions())
    matches = [s for s in sessions if s.display_name == name] or [
        s for s in sessions if (s.display_name or "").casefold() == name.casefold()
    ]
    if len(matches) == 1:
        return Named(word, matches[0].id, matches[0])
    if not matches and not complete and is_session_id(word):
        return Named(word, word)  # maybe past the pages read: as an id, as before names
    return Named(word, matches=tuple(matches), complete=complete)


async def _known(deps: CommandDeps, asker: Asker, word: str) -> bool:
    async with deps.sessionmaker() as db:
        return await known_session(
            db, team_id=asker.team_id, channel_id=asker.channel_id, session_id=word
        )


def with_id(text: str, session_id: str) -> str | None:
    """The command `text` with the session it named given by `session_id` instead:
    what a button runs for one of several matches. None when that is not the same
    command (the word could not be found in its place)."""
    command = parse(text)
    word = command.target
    if word is None:
        return None
    words = text.split()
    for place in (0, 1):
        if place < len(words) and words[place] == word:
            tried = [*words[:place], session_id, *words[place + 1 :]]
            again = parse(" ".join(tried))
            if again.target == session_id and again.verb == command.verb:
                return " ".join(tried)
    return None


def resolved(command: Command, named: Named) -> Command:
    """The command naming the one session `named` found."""
    assert named.session_id is not None
    return command.naming(named.session_id, named.session)
