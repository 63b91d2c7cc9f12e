"""An app's tools.py with instance tools and a programmatic tool, for the autodiscovery test."""

from toolhub import Tool, tool, tools_from_instance


class Weather:
    """Tools bound to one weather station."""

    def __init__(self, station: str) -> None:
        self.station = station

    @tool(risk="low")
    def temperature(self, city: str) -> str:
        """The temperature in a city."""
        return f"{self.station}: 21C in {city}"


STATION_TOOLS = tools_from_instance(Weather("north"), naming="north_")
ECHO = Tool.create("echo_back", "Echo the arguments.", {"text": str}, lambda arguments: arguments["text"], risk="low")
