"""An LLM agent: a name, a policy text, a chat model and a Reflexion memory.

It can ``speak`` (write a message from its observation and the transcript it may see),
``act`` (chain-of-thought, then one legal action, with lenient parsing, one re-prompt and
a fallback; or, where the observation lists no legal actions, a free-text answer: code, a
math result or a short answer, extracted from the reply) and ``reflect`` (write a lesson).
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from marlang.agents.action_parsing import parse_action
from marlang.agents.answer_parsing import extract_answer
from marlang.agents.calls import call_model, call_seed, invoke_model, prompt_text, reply_text
from marlang.agents.memory import ReflexionMemory
from marlang.prompts import PromptLibrary
from marlang.types import Acting, CallContext, Decision, Message, ScoredChoice, TextObservation, Trajectory

logger = logging.getLogger(__name__)


CALIBRATIONS = ("none", "content_free")
"""Valid ``agents.calibration``: how a scoring agent's action scores become its policy."""

CONTENT_FREE = "N/A"
"""The observation text of the content-free prompt the prior is scored on."""

FREE_TEXT_ACTIONS = {
    "code": "any Python code (you answer with a program)",
    "math": "any text (you answer with a worked solution and a final answer)",
    "text": "any text (you answer in words)",
}
"""What the system prompt lists as possible actions when the observation asks for free text."""

_REPROMPTS = {
    "code": ("Python code block", "one complete ```python code block", "```python\n"),
    "math": ("final answer in \\boxed{}", "the final answer as \\boxed{<answer>}", "\\boxed{"),
    "text": ("answer line", "one line 'Answer: <a short answer>'", "Answer: "),
}
"""Per answer format: what was missing, what to write, and the reply's start on local models."""


ACTION_PREFIX = "Action: "
"""What a scoring agent's reply says before the action it scores (after its thought, if any)."""


def history_entry(step: int, obs: TextObservation, decision: Decision) -> str:
    """What an agent remembers of its decision at ``step`` (its prompts' recent steps)."""
    if obs.legal_actions:
        return f"step {step}: you did '{decision.action}'"
    shown = " ".join(decision.action.split())[:80] or "(no answer)"
    return f"step {step}: you answered '{shown}'"


def _answer_format(obs: TextObservation) -> str:
    form = obs.data.get("answer_format", "text")
    return form if form in FREE_TEXT_ACTIONS else "text"


def render_transcript(messages: list[Message], heading: str = "Messages from your team:") -> str:
    if not messages:
        return ""
    return heading + "\n" + "\n".join(f"{m.sender}: {m.content}" for m in messages)


class LLMAgent:
    """A language-model policy for one agent of a team."""

    def __init__(
        self,
        name: str,
        model: BaseChatModel,
        *,
        policy: str,
        memory: ReflexionMemory | None = None,
        prompts: PromptLibrary | None = None,
        n_agents: int = 2,
        chain_of_thought: bool = True,
        reprompt: bool = True,
        fallback_action: str | None = None,
        history: int = 4,
        max_tokens: int = 64,
        message_max_tokens: int = 40,
        reflection_max_tokens: int = 64,
        sample_seeds: bool = False,
        action_selection: str = "generate",
        world: str = "a shared environment",
        calibration: str = "none",
        role: str | None = None,
    ) -> None:
        if action_selection not in ("generate", "score"):
            raise ValueError(f"agents.action_selection must be 'generate' or 'score', got {action_selection!r}")
        if calibration not in CALIBRATIONS:
            raise ValueError(f"agents.calibration must be one of {', '.join(CALIBRATIONS)}, got {calibration!r}")
        self.name = name
        self.model = model
        self.policy = policy
        self.memory = memory if memory is not None else ReflexionMemory()
        self.prompts = prompts if prompts is not None else PromptLibrary()
        self.n_agents = n_agents
        self.chain_of_thought = chain_of_thought
        self.reprompt = reprompt
        self.fallback_action = fallback_action
        self.history = history
        self.max_tokens = max_tokens
        self.message_max_tokens = message_max_tokens
        self.reflection_max_tokens = reflection_max_tokens
        self.sample_seeds = sample_seeds
        self.action_selection = action_selection
        self.world = world
        """What the environment is, in a phrase ("a kitchen, as cooks who ..."), for prompts."""
        self.calibration = calibration
        self.role = role
        """Role instructions (``team.<slot>.role``) in every prompt to speak and act; learners
        never rewrite them. A protocol may give other ones for one call (``role=``)."""
        """content_free: a scoring agent's policy is softmax(scores - prior), the prior being the
        base model's scores of the same actions when the observation reads "N/A"."""
        self._priors: dict[tuple[str, ...], list[float]] = {}
        self.adapter: str | None = None
        """The LoRA adapter this agent's calls go to (a trained team played back); None: the
        model as it is. An episode's `Acting` (``ctx.acting``) may name another."""
        self.action_temperature: float = 0.0
        """Above 0, a scoring agent samples its action from softmax(scores / temperature)
        instead of taking the best. An episode's `Acting` may set another (a weight-space
        learner's training rollouts)."""

    # prompts -----------------------------------------------------------------------------
    def system_prompt(self, obs: TextObservation, role: str | None = None) -> str:
        """The system prompt for ``obs``; ``role``: instructions for this call instead of the
        agent's own (``self.role``)."""
        role = self.role if role is None else role
        return self.prompts.get("system").render(
            agent=self.name,
            n_agents=self.n_agents,
            world=self.world,
            role=f" Your role: {role.strip()}" if role and role.strip() else "",
            mission=obs.mission,
            actions=", ".join(obs.legal_actions) or FREE_TEXT_ACTIONS[_answer_format(obs)],
            policy=self.policy,
            reflections=self.memory.render_reflections(),
        )

    def _history(self, ctx: CallContext, entries: list[str] | None = None) -> str:
        if entries is None:
            recent = self.memory.recent(ctx.episode, self.history)
        else:
            recent = entries[-self.history:] if self.history > 0 else []
        return ("Your recent steps:\n" + "\n".join(recent)) if recent else ""

    def act_messages(
        self, obs: TextObservation, transcript: list[Message], ctx: CallContext, instruction: str | None = None,
        role: str | None = None, history: list[str] | None = None,
    ) -> list[BaseMessage]:
        """The prompt to act on ``obs``; ``history``: the episode's `history_entry`s so far
        instead of the ones this agent's memory holds for ``ctx.episode``."""
        if instruction is None:
            instruction = "act_instruction_cot" if self.chain_of_thought else "act_instruction_direct"
        instruction = self.prompts.get(instruction).render()
        user = self.prompts.get("act").render(
            observation=obs.text,
            history=self._history(ctx, history),
            messages=render_transcript(transcript),
            instruction=instruction,
        )
        return [SystemMessage(self.system_prompt(obs, role)), HumanMessage(user)]

    def scoring_messages(self, obs: TextObservation, transcript: list[Message], ctx: CallContext,
                         role: str | None = None, history: list[str] | None = None) -> list[BaseMessage]:
        """The prompt a scoring agent thinks (optionally) and then scores its actions after
        (`act_messages` with the scoring instruction)."""
        instruction = "act_instruction_score" if self.chain_of_thought else "act_instruction_direct"
        return self.act_messages(obs, transcript, ctx, instruction=instruction, role=role, history=history)

    def next_decision_messages(self, trajectory: Trajectory) -> list[BaseMessage]:
        """The scoring prompt on ``trajectory``'s final observation, as this agent's next
        decision in it would be rendered: its instruction and the episode's recent steps (no
        team messages: none were sent yet). What a cut-off episode's bootstrap value is read on."""
        entries = [history_entry(step.t, step.observations[self.name], step.decisions[self.name])
                   for step in trajectory.steps if self.name in step.decisions and self.name in step.observations]
        ctx = CallContext(episode=trajectory.episode).for_step(len(trajectory.steps))
        return self.scoring_messages(trajectory.final_observations[self.name], [], ctx, history=entries)

    def speak_messages(self, obs: TextObservation, transcript: list[Message], ctx: CallContext,
                       role: str | None = None) -> list[BaseMessage]:
        user = self.prompts.get("speak").render(
            observation=obs.text,
            messages=render_transcript(transcript, "Conversation so far:"),
        )
        return [SystemMessage(self.system_prompt(obs, role)), HumanMessage(user)]

    # model calls -------------------------------------------------------------------------
    def _seed(self, ctx: CallContext, role: str, extra: int = 0) -> int:
        if ctx.salt:
            return call_seed(ctx.seed, ctx.episode, ctx.step, self.name, role, extra, ctx.salt)
        return call_seed(ctx.seed, ctx.episode, ctx.step, self.name, role, extra)

    def acting(self, ctx: CallContext) -> Acting:
        """How this agent acts in ``ctx``'s episode: the phase's settings over its own."""
        given = ctx.acting.get(self.name)
        if given is None:
            return Acting(self.model, self.adapter, self.action_selection, self.action_temperature)
        return Acting(
            self.model if given.model is None else given.model,
            self.adapter if given.adapter is None else given.adapter,
            self.action_selection if given.action_selection is None else given.action_selection,
            self.action_temperature if given.action_temperature is None else given.action_temperature,
        )

    def _call_kwargs(self, ctx: CallContext, role: str, max_tokens: int, extra: int,
                     call_kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """The chat model this agent's call in ``ctx`` goes to, and the call's arguments: its
        role and seed (sampled seeds), the phase's adapter, the caller's parameters."""
        seed = call_kwargs.pop("seed", None)
        if seed is None and self.sample_seeds:
            seed = self._seed(ctx, role, extra)
        acting = self.acting(ctx)
        if acting.adapter is not None:
            call_kwargs["adapter"] = acting.adapter
        return acting.model, {"role": role, "agent": self.name, "max_tokens": max_tokens, "seed": seed,
                              **call_kwargs}

    async def _invoke(
        self, messages: list[BaseMessage], ctx: CallContext, role: str, max_tokens: int, extra: int = 0,
        **call_kwargs: Any,
    ) -> BaseMessage:
        model, kwargs = self._call_kwargs(ctx, role, max_tokens, extra, call_kwargs)
        return await invoke_model(model, messages, ctx, **kwargs)

    async def _call(
        self, messages: list[BaseMessage], ctx: CallContext, role: str, max_tokens: int, extra: int = 0,
        **call_kwargs: Any,
    ) -> str:
        model, kwargs = self._call_kwargs(ctx, role, max_tokens, extra, call_kwargs)
        return await call_model(model, messages, ctx, **kwargs)

    # capabilities ------------------------------------------------------------------------
    async def speak(
        self, obs: TextObservation, transcript: list[Message], ctx: CallContext, round: int = 0,
        role: str | None = None,
    ) -> Message:
        """A message to the team; ``role``: instructions for this message instead of the
        agent's own role (a protocol giving one speaker other instructions)."""
        reply = await self._invoke(self.speak_messages(obs, transcript, ctx, role), ctx, "speaker",
                                   self.message_max_tokens, round)
        text = reply_text(reply).split("\n\n")[0].strip() or "(no message)"
        return Message(sender=self.name, content=text, round=round, prompt=prompt_text(reply))

    async def act(self, obs: TextObservation, transcript: list[Message], ctx: CallContext,
                  role: str | None = None) -> Decision:
        """One action (or free-text answer) for ``obs``; ``role`` as in :meth:`speak`."""
        if len(obs.legal_actions) == 1:
            # Nothing to choose (e.g. waiting for a teammate's turn): no model call.
            decision = Decision(obs.legal_actions[0], valid=True)
        elif not obs.legal_actions:
            decision = await self._answer_in_text(obs, transcript, ctx, role)
        elif self.acting(ctx).action_selection == "score":
            decision = await self._act_by_scoring(obs, transcript, ctx, role)
        else:
            decision = await self._act_by_generating(obs, transcript, ctx, role)
        self.memory.record(ctx.episode, history_entry(ctx.step, obs, decision))
        return decision

    async def _answer_in_text(self, obs: TextObservation, transcript: list[Message], ctx: CallContext,
                              role: str | None = None) -> Decision:
        """A free-text answer in the format the observation asks for (``data["answer_format"]``:
        code, math or text). A reply without one is asked again once (local models get the
        start of the format as the reply's beginning); still none is an empty, invalid action."""
        form = _answer_format(obs)
        entry_point = obs.data.get("entry_point") if form == "code" else None
        messages = self.act_messages(obs, transcript, ctx, instruction=f"act_instruction_{form}", role=role)
        raw = await self._call(messages, ctx, "actor", self.max_tokens)
        found = extract_answer(raw, form, entry_point)
        if found.answer is not None:
            return Decision(found.answer, thought=found.thought, raw=raw, valid=True)
        if not self.reprompt:
            return Decision("", thought=found.thought, raw=raw, valid=False)
        what, how, opening = _REPROMPTS[form]
        follow_up = messages + [AIMessage(raw),
                                HumanMessage(self.prompts.get("reprompt_answer").render(what=what, how=how))]
        raw2 = await self._call(follow_up, ctx, "actor", self.max_tokens, extra=1, prefill=opening)
        found2 = extract_answer(raw2, form, entry_point)
        both = f"{raw}\n[re-prompt] {raw2}"
        return Decision(found2.answer or "", thought=found.thought, raw=both, valid=False, reprompted=True)

    async def content_free_prior(self, obs: TextObservation, ctx: CallContext) -> list[float]:
        """The base model's scores of ``obs``'s legal actions after the agent's prompt with the
        observation replaced by "N/A" (no history, no messages, no thought): what the model
        says before it reads anything (contextual calibration, Zhao et al. 2021). Always the
        base model, never an adapter, so the prior stays fixed while the adapters train (a
        constant offset per action: the policy's gradients stay exact). Remembered per prompt."""
        instruction = "act_instruction_score" if self.chain_of_thought else "act_instruction_direct"
        user = self.prompts.get("act").render(observation=CONTENT_FREE, history="", messages="",
                                              instruction=self.prompts.get(instruction).render())
        messages: list[BaseMessage] = [SystemMessage(self.system_prompt(obs)), HumanMessage(user)]
        key = (str(messages[0].content), user, *obs.legal_actions)
        if key not in self._priors:
            model = self.acting(ctx).model
            reply = await invoke_model(model, messages, ctx, role="actor", agent=self.name, max_tokens=1,
                                       choices=list(obs.legal_actions), choice_prefix=ACTION_PREFIX)
            scored = ScoredChoice.from_reply(reply, obs.legal_actions)
            if scored is None:
                raise ValueError(f"agents.calibration 'content_free' needs a model that scores choices; "
                                 f"{type(model).__name__} returned no scores")
            if len(self._priors) >= 4096:
                self._priors.clear()
            self._priors[key] = list(scored.scores)
        return self._priors[key]

    async def _act_by_scoring(self, obs: TextObservation, transcript: list[Message], ctx: CallContext,
                              role: str | None = None) -> Decision:
        """Think (optionally), then let the model score every legal action and take the best,
        argmax_a log p(a | prompt, thought), or sample one from the softmax over the scores
        (``action_temperature`` > 0). Every decision is legal by construction; the decision
        records every score, log pi of the action, the value where the model has a value
        head, and the exact scored prompt."""
        messages = self.scoring_messages(obs, transcript, ctx, role=role)
        thought = ""
        if self.chain_of_thought:
            raw = await self._call(messages, ctx, "actor", self.max_tokens, stop=["Action:", "\n\n"])
            thought = " ".join(raw.split("Action:")[0].split())
        prefix = (f"{thought}\n" if thought else "") + ACTION_PREFIX
        sampling: dict[str, Any] = {}
        temperature = self.acting(ctx).action_temperature or 0.0
        if temperature > 0:
            sampling = {"temperature": temperature, "seed": self._seed(ctx, "actor", 2)}
        if self.calibration == "content_free":
            prior = await self.content_free_prior(obs, ctx)
            sampling["choice_offsets"] = [-p for p in prior]
        reply = await self._invoke(messages, ctx, "actor", 1, extra=2, choices=list(obs.legal_actions),
                                   choice_prefix=prefix, **sampling)
        answer = reply_text(reply)
        if answer in obs.legal_actions:
            scored = ScoredChoice.from_reply(reply, obs.legal_actions)
            if scored is None:  # a model that picks a choice without scoring them
                return Decision(answer, thought=thought, raw=f"{prefix}{answer}", valid=True)
            return Decision(
                answer, thought=thought, raw=f"{prefix}{answer}", valid=True,
                logprob=scored.logprob, value=scored.value, scores=list(scored.scores),
                prompt=scored.prompt, choice_lead=scored.lead, sampled=scored.sampled,
                offsets=sampling.get("choice_offsets"),
            )
        # A chat model that claims choices but answers something else: counted as invalid.
        parsed = parse_action(answer, obs.legal_actions)
        action = parsed.action or self._fallback(obs)
        return Decision(action, thought=thought, raw=f"{prefix}{answer}", valid=False,
                        fallback=parsed.action is None)

    def _fallback(self, obs: TextObservation) -> str:
        return self.fallback_action if self.fallback_action in obs.legal_actions else obs.legal_actions[0]

    async def _act_by_generating(self, obs: TextObservation, transcript: list[Message], ctx: CallContext,
                                 role: str | None = None) -> Decision:
        messages = self.act_messages(obs, transcript, ctx, role=role)
        raw = await self._call(messages, ctx, "actor", self.max_tokens)
        parsed = parse_action(raw, obs.legal_actions)
        if parsed.action is not None:
            return Decision(parsed.action, thought=parsed.thought, raw=raw, valid=True)
        decision: Decision | None = None
        if self.reprompt:
            follow_up = messages + [
                AIMessage(raw),
                HumanMessage(self.prompts.get("reprompt").render(actions=", ".join(obs.legal_actions))),
            ]
            raw2 = await self._call(follow_up, ctx, "actor", 16, extra=1)
            parsed2 = parse_action(raw2, obs.legal_actions)
            if parsed2.action is not None:
                decision = Decision(
                    parsed2.action, thought=parsed.thought, raw=f"{raw}\n[re-prompt] {raw2}",
                    valid=False, reprompted=True,
                )
            else:
                raw = f"{raw}\n[re-prompt] {raw2}"
        if decision is None:
            fallback = self._fallback(obs)
            decision = Decision(fallback, thought=parsed.thought, raw=raw, valid=False,
                                reprompted=self.reprompt, fallback=True)
            logger.debug("%s: no legal action in %r; fallback %r", self.name, raw, fallback)
        return decision

    async def reflect(self, trajectory: Trajectory, ctx: CallContext, steps: list[str] | None = None,
                      max_steps_shown: int = 12) -> str:
        """A lesson from one finished episode. ``steps`` are this agent's steps in words (the
        env's narration: what mattered, what it did, rewards); without them, the first line
        of each observation and the action."""
        if steps is None:
            steps = []
            for step in trajectory.steps:
                obs = step.observations.get(self.name)
                d = step.decisions.get(self.name)
                seen = obs.text.splitlines()[0] if obs and obs.text else ""
                steps.append(f"step {step.t}: saw '{seen}', did '{d.action if d else '-'}'")
        shown = steps[-max_steps_shown:]
        if len(steps) > len(shown):
            shown = [f"({len(steps) - len(shown)} earlier steps not shown)", *shown]
        ret = trajectory.team_return
        outcome = (
            f"success: the team finished the mission in {trajectory.n_steps} steps (team return {ret:g})"
            if trajectory.success
            else f"failure: the mission was not finished in {trajectory.n_steps} steps (team return {ret:g})"
        )
        first_obs = trajectory.steps[0].observations.get(self.name) if trajectory.steps else None
        system = self.system_prompt(first_obs) if first_obs else self.policy
        user = self.prompts.get("reflect").render(outcome=outcome, trajectory="\n".join(shown))
        text = await self._call([SystemMessage(system), HumanMessage(user)], ctx, "reflector",
                                self.reflection_max_tokens)
        return text.split("\n\n")[0].strip()
