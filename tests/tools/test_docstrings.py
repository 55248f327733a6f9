"""Google, NumPy and Sphinx docstrings: the prose is the description, the parameters go to the schema."""

from maitre import Toolbox
from maitre.tools.docstrings import parse_docstring

SUMMARY = "List Saturday's events in a city. Use it to plan a day. Do not use it for weather."


def described(fn):
    box = Toolbox()
    box.add_tool(fn)
    tool = box.get(fn.__name__)
    return tool.description, {k: v.get("description") for k, v in tool.input_schema["properties"].items()}


def test_google_style_keeps_its_behaviour():
    def find_events(city: str, max_price_inr: int = 100) -> dict:
        """List Saturday's events in a city. Use it to plan a day. Do not use it for weather.

        Args:
            city: City name, for example Pune.
            max_price_inr (int): Only events at or below
                this price.

        Returns:
            The events, cheapest first.

        Raises:
            ToolError: when the city is unknown.
        """
        return {}

    description, props = described(find_events)
    assert description == SUMMARY
    assert props == {
        "city": "City name, for example Pune.",
        "max_price_inr": "Only events at or below this price.",
    }


def test_numpy_style_sections_never_reach_the_description():
    def find_events(city: str, max_price_inr: int = 100) -> dict:
        """List Saturday's events in a city. Use it to plan a day. Do not use it for weather.

        Parameters
        ----------
        city : str
            City name, for example Pune.
        max_price_inr : int, optional
            Only events at or below
            this price.

        Returns
        -------
        dict
            The events.
        """
        return {}

    description, props = described(find_events)
    assert description == SUMMARY
    assert "Parameters" not in description and "----" not in description
    assert props == {
        "city": "City name, for example Pune.",
        "max_price_inr": "Only events at or below this price.",
    }


def test_sphinx_style_fields_never_reach_the_description():
    def find_events(city: str, max_price_inr: int = 100) -> dict:
        """List Saturday's events in a city. Use it to plan a day. Do not use it for weather.

        :param city: City name, for example Pune.
        :type city: str
        :param max_price_inr: Only events at or below
            this price.
        :returns: The events.
        :raises ToolError: when the city is unknown.
        """
        return {}

    description, props = described(find_events)
    assert description == SUMMARY
    assert ":param" not in description and ":returns" not in description
    assert props == {
        "city": "City name, for example Pune.",
        "max_price_inr": "Only events at or below this price.",
    }


def test_a_docstring_with_no_sections_is_all_description():
    text = "Look up one order: by its id only.\n\nUse it when the user asks. Do not use it to search."
    assert parse_docstring(text) == (text, {})
    assert parse_docstring(None) == ("", {})
    assert parse_docstring("   ") == ("", {})


def test_notes_stay_for_the_model_examples_and_returns_do_not():
    description, params = parse_docstring(
        """Refund an order.

        Note:
            Amounts are in INR.

        Example:
            >>> issue_refund("A1042", "12.00")

        Args:
            order_id: The order.
        """
    )
    assert description == "Refund an order.\n\nNote: Amounts are in INR."
    assert params == {"order_id": "The order."}


def test_a_sphinx_docstring_with_a_note_is_still_read_as_sphinx():
    description, params = parse_docstring(
        """Refund an order.

        Note:
            Amounts are in INR.

        :param order_id: The order.
        """
    )
    assert params == {"order_id": "The order."}
    assert ":param" not in description
    assert description.startswith("Refund an order.")


def test_a_google_header_without_a_blank_line_above_still_counts():
    assert parse_docstring("Get the weather.\nArgs:\n    city: The city.") == (
        "Get the weather.",
        {"city": "The city."},
    )


def test_names_documented_together_each_get_the_description():
    _, params = parse_docstring("Serve it.\n\nArgs:\n    host, port: where it is bound.\n")
    assert params == {"host": "where it is bound.", "port": "where it is bound."}


def test_an_explicit_field_description_wins_over_the_docstring():
    from typing import Annotated

    from pydantic import Field

    def get_weather(city: Annotated[str, Field(description="From the annotation.")]) -> str:
        """Get the weather.

        Parameters
        ----------
        city : str
            From the docstring.
        """
        return ""

    _, props = described(get_weather)
    assert props == {"city": "From the annotation."}
