"""build_graph(): the crew's LangGraph state machine.

START -> baseline -> observe -> [specialists in parallel] -> coordinator -> execute
      -> (compile error -> revise -> execute) -> verify
      -> (wrong result, LLM author, once -> revise -> execute) -> benchmark (+ gate)
      -> critique -> reflect -> observe | finalize -> END
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph

from kernelcrew.graph.context import RunContext
from kernelcrew.graph.nodes.critic import critique
from kernelcrew.graph.nodes.evaluate import benchmark, verify
from kernelcrew.graph.nodes.execute import execute, revise
from kernelcrew.graph.nodes.finalize import finalize
from kernelcrew.graph.nodes.observe import observe
from kernelcrew.graph.nodes.plan import coordinator, fan_out, specialist
from kernelcrew.graph.nodes.reflect import reflect, route
from kernelcrew.graph.nodes.setup import baseline
from kernelcrew.graph.state import CrewInput, CrewState

RECURSION_LIMIT = 400  # ~12 supersteps per iteration; far above any sane --max-iters


def build_graph(checkpointer: Any = None) -> Any:
    g = StateGraph(CrewState, context_schema=RunContext, input_schema=CrewInput)
    g.add_node("baseline", baseline)
    g.add_node("observe", observe)
    g.add_node("specialist", specialist)
    g.add_node("coordinator", coordinator)
    g.add_node("execute", execute)
    g.add_node("revise", revise)
    g.add_node("verify", verify)
    g.add_node("benchmark", benchmark)
    g.add_node("critique", critique)
    g.add_node("reflect", reflect)
    g.add_node("finalize", finalize)
    g.add_edge(START, "baseline")
    g.add_edge("baseline", "observe")
    g.add_conditional_edges("observe", fan_out, ["specialist"])
    g.add_edge("specialist", "coordinator")
    g.add_edge("coordinator", "execute")
    g.add_edge("revise", "execute")
    g.add_edge("benchmark", "critique")
    g.add_edge("critique", "reflect")
    g.add_conditional_edges("reflect", route, ["observe", "finalize"])
    g.add_edge("finalize", END)
    return g.compile(checkpointer=checkpointer)


# For `langgraph dev` / Studio (langgraph.json): compiled without a checkpointer.
graph = build_graph()
