"""What the index reads: identifiers split into words, parameters found, query terms cleaned."""

from maitre.search.text import embedding_text, parameter_fields, query_terms, split_identifier


def test_identifiers_split_on_snake_camel_dots_and_digits():
    assert split_identifier("get_order") == "get order"
    assert split_identifier("Weather_1_GetWeather") == "weather 1 get weather"
    assert split_identifier("orders.getOrderByID") == "orders get order by id"
    assert split_identifier("HTTPServer2") == "http server 2"


def test_parameter_names_descriptions_and_enum_values_are_found_in_nested_schemas():
    schema = {
        "type": "object",
        "properties": {
            "order_id": {"type": "string", "description": "Order id, for example A1042"},
            "reason": {"enum": ["damaged", "wrong_item", "late"]},
            "address": {
                "type": "object",
                "properties": {"postCode": {"type": "string", "description": "Postal code"}},
            },
            "tags": {"type": "array", "items": {"enum": ["gift", "fragile"]}},
        },
    }
    names, texts = parameter_fields(schema)
    assert names == ["order id", "reason", "address", "post code", "tags"]
    assert "Order id, for example A1042" in texts
    assert "damaged wrong_item late" in texts
    assert "gift fragile" in texts
    assert parameter_fields(None) == ([], [])


def test_the_embedding_text_carries_name_words_description_and_parameters():
    text = embedding_text(
        "get_order", "Look up one order.", {"properties": {"order_id": {"description": "Id"}}}
    )
    assert text == "get_order (get order): Look up one order. Parameters: order id. Id"
    assert embedding_text("ping", "Ping.", None) == "ping (ping): Ping."


def test_query_terms_drop_stop_words_and_keep_order_once():
    assert query_terms("Where is my order A1042? Where is the ORDER?") == ["order", "a1042"]
    assert query_terms("the of and") == []
    assert query_terms("getWeather for Pune") == ["weather", "pune"]


def test_values_in_the_query_add_the_parameter_type_words():
    assert query_terms("weather in Pune on 2023-04-15")[-1] == "date"
    assert "date" in query_terms("forecast for March 5th")
    assert "time" in query_terms("wake me at 6:30 am")
    assert "email" in query_terms("write to andy@gorilla.ai")
    assert "url" in query_terms("fetch https://example.com/x")
    assert query_terms("tell me a story") == ["story"]


def test_non_english_words_survive():
    assert query_terms("Qual a temperatura atual em Divinópolis?") == [
        "qual",
        "temperatura",
        "atual",
        "em",
        "divinópolis",
    ]
