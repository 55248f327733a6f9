"""The labels of AgentDojo's tools, derived by one stated rule from what each tool does.

The facts are written per tool, in plain words the tool's own description supports; the labels are
computed from them by `labels_for`, never written by hand, so no label is tuned to an attack:

- **trust**: a tool whose result contains third-party-authored content - emails (any folder: a
  sent mail quotes what it answers), files, web pages, chat messages, channel and user names that
  other members chose, reviews, calendar entries others can write (invitations), transactions'
  subjects (the sender writes them) - is `untrusted`. A result that holds only the user's own
  records (profile, balance, IBAN, contacts, the current day) or the structured listing a service
  publishes itself (hotels, prices, addresses, opening hours, flights), or only echoes what the
  call itself wrote, is `trusted`.
- **effect**: a tool that removes or cancels something is `destructive`; a tool that changes state
  in a service (sends, books, creates, shares, updates, invites, posts) is a `write`; everything
  else is a `read`. A service's bookkeeping of a read (a mailbox flagging what it returned as
  read, a web host logging the request) is not a change of state in this sense (the tests check
  that reads change nothing else).
- **open_world**: every write and destructive tool (each changes state in a service that reaches
  other people or money).
- **egress**: a read whose arguments reach a third party - the request leaves the user's own
  services (`get_webpage` fetches whatever host the URL names; that host reads the URL).

Risk stays `low` for every tool: the risk matrix then needs approval for destructive tools only,
and the data-flow rules decide the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...types import Effect, Trust

__all__ = ["FACTS", "LABEL_RULE", "ToolFacts", "ToolLabels", "label_table", "labels_for"]

LABEL_RULE = (
    "trust: untrusted when the result holds third-party-authored content (emails, files, web pages, "
    "messages, channel/user names, reviews, calendar entries, transactions' subjects); "
    "effect: destructive when it removes or cancels, write when it changes state in a service, else read; "
    "open_world: every write and destructive tool; "
    "egress: a read whose arguments reach a third party (the request leaves the user's own services)"
)
"""The rule in one line, as the report prints it."""


@dataclass(frozen=True, kw_only=True)
class ToolFacts:
    """What one tool does, in the terms the rule reads."""

    third_party_content: bool = False
    """Its result contains text a third party wrote."""
    changes_state: bool = False
    """It changes state in a service."""
    removes: bool = False
    """It removes or cancels something."""
    reaches_third_party: bool = False
    """Its arguments leave the user's own services (a fetch from an arbitrary host)."""
    why: str = ""


@dataclass(frozen=True, kw_only=True)
class ToolLabels:
    """The maitre metadata the rule gives a tool."""

    effect: Effect
    trust: Trust
    open_world: bool
    egress: bool


def labels_for(facts: ToolFacts) -> ToolLabels:
    """The labels of a tool with these facts (the rule of the module docstring)."""
    if facts.removes:
        effect = Effect.DESTRUCTIVE
    elif facts.changes_state:
        effect = Effect.WRITE
    else:
        effect = Effect.READ
    return ToolLabels(
        effect=effect,
        trust=Trust.UNTRUSTED if facts.third_party_content else Trust.TRUSTED,
        open_world=effect is not Effect.READ,
        egress=effect is Effect.READ and facts.reaches_third_party,
    )


def _f(
    why: str, *, content: bool = False, write: bool = False, removes: bool = False, out: bool = False
) -> ToolFacts:
    return ToolFacts(
        third_party_content=content,
        changes_state=write or removes,
        removes=removes,
        reaches_third_party=out,
        why=why,
    )


_EMAILS = "returns emails"
_EVENTS = "returns calendar events (invitations others write)"
_FILE = "returns files' content"
_LISTING = "returns the service's own listing"
_REVIEWS = "returns reviews"
_OWN = "returns the user's own records"

FACTS: dict[str, dict[str, ToolFacts]] = {
    "workspace": {
        "send_email": _f("sends an email; returns the email it sent", write=True),
        "delete_email": _f("deletes an email; returns a confirmation", removes=True),
        "get_unread_emails": _f(_EMAILS, content=True),
        "get_sent_emails": _f(_EMAILS, content=True),
        "get_received_emails": _f(_EMAILS, content=True),
        "get_draft_emails": _f(_EMAILS, content=True),
        "search_emails": _f(_EMAILS, content=True),
        "search_contacts_by_name": _f(_OWN + " (the address book)"),
        "search_contacts_by_email": _f(_OWN + " (the address book)"),
        "get_current_day": _f("returns the date"),
        "search_calendar_events": _f(_EVENTS, content=True),
        "get_day_calendar_events": _f(_EVENTS, content=True),
        "create_calendar_event": _f("creates an event, invites participants; returns it", write=True),
        "cancel_calendar_event": _f("cancels an event; returns a confirmation", removes=True),
        "reschedule_calendar_event": _f(
            "moves an event; returns it (others' text)", content=True, write=True
        ),
        "add_calendar_event_participants": _f("invites people; returns the event", content=True, write=True),
        "append_to_file": _f("appends to a file; returns the file", content=True, write=True),
        "search_files_by_filename": _f(_FILE, content=True),
        "create_file": _f("creates a file; returns what it wrote", write=True),
        "delete_file": _f("deletes a file; returns the deleted file", content=True, removes=True),
        "get_file_by_id": _f(_FILE, content=True),
        "list_files": _f(_FILE, content=True),
        "share_file": _f("shares a file; returns the file", content=True, write=True),
        "search_files": _f(_FILE, content=True),
    },
    "travel": {
        "get_user_information": _f(_OWN),
        "get_all_hotels_in_city": _f(_LISTING),
        "get_hotels_prices": _f(_LISTING),
        "get_rating_reviews_for_hotels": _f(_REVIEWS, content=True),
        "get_hotels_address": _f(_LISTING),
        "get_all_restaurants_in_city": _f(_LISTING),
        "get_cuisine_type_for_restaurants": _f(_LISTING),
        "get_restaurants_address": _f(_LISTING),
        "get_rating_reviews_for_restaurants": _f(_REVIEWS, content=True),
        "get_dietary_restrictions_for_all_restaurants": _f(_LISTING),
        "get_contact_information_for_restaurants": _f(_LISTING),
        "get_price_for_restaurants": _f(_LISTING),
        "check_restaurant_opening_hours": _f(_LISTING),
        "get_all_car_rental_companies_in_city": _f(_LISTING),
        "get_car_types_available": _f(_LISTING),
        "get_rating_reviews_for_car_rental": _f(_REVIEWS, content=True),
        "get_car_fuel_options": _f(_LISTING),
        "get_car_rental_address": _f(_LISTING),
        "get_car_price_per_day": _f(_LISTING),
        "create_calendar_event": _f("creates an event, invites participants; returns it", write=True),
        "search_calendar_events": _f(_EVENTS, content=True),
        "get_day_calendar_events": _f(_EVENTS, content=True),
        "cancel_calendar_event": _f("cancels an event; returns a confirmation", removes=True),
        "reserve_hotel": _f("books a hotel; returns a confirmation", write=True),
        "reserve_car_rental": _f("books a car; returns a confirmation", write=True),
        "reserve_restaurant": _f("books a table; returns a confirmation", write=True),
        "get_flight_information": _f(_LISTING),
        "send_email": _f("sends an email; returns the email it sent", write=True),
    },
    "banking": {
        "get_iban": _f(_OWN),
        "send_money": _f("sends money; returns a confirmation", write=True),
        "schedule_transaction": _f("schedules a payment; returns a confirmation", write=True),
        "update_scheduled_transaction": _f("changes a scheduled payment; returns a confirmation", write=True),
        "get_balance": _f(_OWN),
        "get_most_recent_transactions": _f("returns transactions (subjects senders wrote)", content=True),
        "get_scheduled_transactions": _f("returns scheduled transactions (their subjects)", content=True),
        "read_file": _f(_FILE, content=True),
        "get_user_info": _f(_OWN),
        "update_password": _f("changes the password; returns a confirmation", write=True),
        "update_user_info": _f("changes the profile; returns the user's own record", write=True),
    },
    "slack": {
        "get_channels": _f("returns channel names members chose", content=True),
        "add_user_to_channel": _f("adds a member to a channel; returns nothing", write=True),
        "read_channel_messages": _f("returns messages", content=True),
        "read_inbox": _f("returns messages", content=True),
        "send_direct_message": _f("sends a message; returns nothing", write=True),
        "send_channel_message": _f("posts a message; returns nothing", write=True),
        "get_users_in_channel": _f("returns user names members chose", content=True),
        "invite_user_to_slack": _f("invites a person; returns nothing", write=True),
        "remove_user_from_slack": _f("removes a member; returns nothing", removes=True),
        "get_webpage": _f("fetches a page from the host the URL names; returns it", content=True, out=True),
        "post_webpage": _f("publishes a page at a URL; returns nothing", write=True),
    },
}
"""suite -> tool -> facts. A tool of a suite missing here is refused (`labels_for_tool`)."""


def label_table(suite: str | None = None) -> list[dict[str, object]]:
    """One row per tool: suite, tool, the facts' reason, and the labels the rule gives it."""
    rows: list[dict[str, object]] = []
    for name, tools in FACTS.items():
        if suite is not None and name != suite:
            continue
        for tool, facts in tools.items():
            labels = labels_for(facts)
            rows.append(
                {
                    "suite": name,
                    "tool": tool,
                    "effect": labels.effect.value,
                    "trust": labels.trust.value,
                    "open_world": labels.open_world,
                    "egress": labels.egress,
                    "why": facts.why,
                }
            )
    return rows
