"""LangMARL (``learning.method: langmarl``): language-policy training with a centralized LLM
critic that assigns credit per agent. ``learner`` holds the options and the learner, ``graph``
the critic -> gradient -> aggregate -> optimize fan-out, ``parsing`` the reading of replies."""
