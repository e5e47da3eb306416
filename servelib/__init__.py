"""servelib: the formulas, simulator and economics of the LLM-serving textbook.

Every number the book shows is computed here (or measured by :mod:`servelib.measure`).
Modules, one idea each: ``units``, ``models``, ``hardware``, ``memory``, ``roofline``, ``published``,
``precision``, ``quantization``, ``speculative``, ``measure``, ``sim``, ``queueing``,
``disagg``, ``economics``, ``grading``, ``audit``, ``plots``, ``widgets``.
"""
__version__ = "0.1.0"

#: The repository the book is published from (Colab badges and installs point here).
REPO_URL = "https://github.com/llm-serving-book/serving-capacity-economics"
