"""The development set of bench/local_tools.py: questions of our own, apart from the 40 it reports on, on which
`chatagent.llm.local.tool_router.MARGIN` was calibrated (eight tools: the four of the bench, `EXTRA_TOOLS`).

(question, tool, an expected argument) for the tool questions; the arguments are checked as the bench checks its
own: the value, or for names the expected text inside the argument.
"""

from __future__ import annotations

from typing import Any

EXTRA_TOOLS = [  # beside the bench's four tools (DEV_TOOLS in bench/local_tools.py)
    {"name": "send_email", "description": "Send an e-mail to a person.",
     "parameters": {"type": "object", "properties": {"to": {"type": "string"}, "subject": {"type": "string"}}, "required": ["to", "subject"]}},
    {"name": "get_time", "description": "The current local time in a city.",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
    {"name": "stock_price", "description": "The latest stock market price of a company's shares.",
     "parameters": {"type": "object", "properties": {"company": {"type": "string"}}, "required": ["company"]}},
    {"name": "set_timer", "description": "Start a countdown timer for a number of minutes.",
     "parameters": {"type": "object", "properties": {"minutes": {"type": "number"}}, "required": ["minutes"]}},
]  # fmt: skip
DEV_TOOL_QUESTIONS: list[tuple[str, str, dict[str, Any]]] = [
    ("Will it be sunny in Rome?", "get_weather", {"city": "Rome"}),
    ("Weather forecast for Oslo please", "get_weather", {"city": "Oslo"}),
    ("Is it cold in Moscow at the moment?", "get_weather", {"city": "Moscow"}),
    ("Do I need an umbrella in Seattle today?", "get_weather", {"city": "Seattle"}),
    ("How hot is it in Cairo?", "get_weather", {"city": "Cairo"}),
    ("What is 45 plus 78?", "calculate", {"expression": 123}),
    ("How much is 9 * 8?", "calculate", {"expression": 72}),
    ("What is 1000 minus 256?", "calculate", {"expression": 744}),
    ("Work out 3.5 * 4.", "calculate", {"expression": 14}),
    ("Please compute 81 / 9.", "calculate", {"expression": 9}),
    ("How many kilometers is 3 miles?", "convert_units", {"value": 3, "from_unit": "miles", "to_unit": "km"}),
    ("Turn 70 fahrenheit into celsius.", "convert_units", {"value": 70, "from_unit": "fahrenheit", "to_unit": "celsius"}),
    ("What is 12 pounds in kg?", "convert_units", {"value": 12, "from_unit": "pounds", "to_unit": "kg"}),
    ("Convert 6 feet to meters.", "convert_units", {"value": 6, "from_unit": "feet", "to_unit": "meters"}),
    ("How much is the red umbrella?", "lookup_price", {"item": "red umbrella"}),
    ("What do you charge for the coffee grinder?", "lookup_price", {"item": "coffee grinder"}),
    ("Price of the wool scarf?", "lookup_price", {"item": "wool scarf"}),
    ("Check the price list for the yoga mat.", "lookup_price", {"item": "yoga mat"}),
    ("Email Anna that the meeting is moved.", "send_email", {"to": "Anna"}),
    ("Send a mail to Bob about the invoice.", "send_email", {"to": "Bob"}),
    ("Write an e-mail to Carla with subject lunch.", "send_email", {"to": "Carla"}),
    ("What time is it in Sydney?", "get_time", {"city": "Sydney"}),
    ("Tell me the local time in Chicago.", "get_time", {"city": "Chicago"}),
    ("Is it night in Tokyo now?", "get_time", {"city": "Tokyo"}),
    ("What's Apple's share price?", "stock_price", {"company": "Apple"}),
    ("How is Tesla stock trading today?", "stock_price", {"company": "Tesla"}),
    ("Give me the current price of Microsoft shares.", "stock_price", {"company": "Microsoft"}),
    ("Set a timer for 10 minutes.", "set_timer", {"minutes": 10}),
    ("Remind me in 25 minutes with a countdown.", "set_timer", {"minutes": 25}),
    ("Start a 5 minute timer.", "set_timer", {"minutes": 5}),
]  # fmt: skip
DEV_NO_TOOL_QUESTIONS = [
    "Who discovered penicillin?", "What is the capital of Spain?", "Translate 'good night' into German.",
    "Why is grass green?", "Write a limerick about a dog.", "What is an antonym of big?", "Who composed the Moonlight Sonata?",
    "Which language do people speak in Mexico?", "How can I learn to cook?", "Explain gravity simply.",
    "List some vegetables.", "What do cows eat?", "Tell me something funny.", "What is the opposite of up?",
    "How many months are in a year?", "What sound does a cat make?", "Who was Marie Curie?",
    "Give me a name for a goldfish.", "What is the tallest mountain?", "Good morning!",
    "What is a verb?", "Summarise the story of Cinderella.", "Why do we dream?", "Recommend a classic novel.",
    "What is democracy?", "How do plants drink water?", "Describe a rainbow.", "Hi, how are you?",
    "What are the colors of the French flag?", "Can you help me write a birthday card?",
]  # fmt: skip
