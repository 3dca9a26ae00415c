"""LLM agents: policy text, speak/act/reflect, lenient action parsing, Reflexion memory."""

from marlang.agents.action_parsing import ParsedAction, parse_action
from marlang.agents.llm_agent import CallContext, LLMAgent, render_transcript
from marlang.agents.memory import ReflexionMemory

__all__ = ["CallContext", "LLMAgent", "ParsedAction", "ReflexionMemory", "parse_action", "render_transcript"]
