"""Progressive disclosure: which tools a run's model sees, decided per run after permissions.

Tool groups activated by rules or by the ``reset_equipped_tools`` meta tool, unfolding facades
(``UnfoldingTool``), and the ``tool_search`` meta tool over the tools the principal is granted. What a
run can see is stored on the run (``DisclosureState``), so a resumed run sees what it saw before.
"""

from toolhub.disclosure.state import DisclosureState
from toolhub.disclosure.unfolding import UnfoldingTool, facade_of, unfolding_tools

__all__ = ["DisclosureState", "UnfoldingTool", "facade_of", "unfolding_tools"]
